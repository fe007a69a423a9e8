"""serve's network edge: Host allow-list, Origin, control token, size limits, timeouts, admission (loopback only)."""

import errno
import json
import re
import shutil
import subprocess
import socket
import time

import pytest

from workbench.errors import ConfigError
from workbench_serve.edge import EdgeLimits, head_refusal, refusal, response_bytes, token_ok

LIMITS = EdgeLimits()


def test_refusal_rules():
    ok = {"host": "127.0.0.1:8000"}
    assert refusal(LIMITS, "GET", "/healthz", ok, 0) is None
    assert refusal(LIMITS, "GET", "/healthz", {"host": "[::1]:8000"}, 0) is None
    assert refusal(LIMITS, "GET", "/healthz", {"host": "LOCALHOST."}, 0) is None
    assert refusal(LIMITS, "GET", "/healthz", {"host": "evil.example"}, 0)[:2] == (421, "host")
    assert refusal(LIMITS, "GET", "/healthz", {}, 0)[:2] == (421, "host")
    assert (
        refusal(EdgeLimits(allow_hosts=("*",)), "GET", "/healthz", {"host": "evil.example"}, 0)
        is None
    )
    # a cross-origin POST (a web page's no-cors fetch carries Origin) is refused; same-origin and no Origin pass
    assert refusal(LIMITS, "POST", "/predict", ok | {"origin": "http://evil.example"}, 0)[:2] == (
        403,
        "origin",
    )
    assert refusal(LIMITS, "POST", "/shutdown", ok | {"origin": "null"}, 0)[:2] == (403, "origin")
    assert refusal(LIMITS, "POST", "/predict", ok | {"origin": "http://localhost:8000"}, 0) is None
    assert refusal(LIMITS, "POST", "/predict", ok | {"origin": "http://[::1]:8000"}, 0) is None
    assert refusal(LIMITS, "GET", "/healthz", ok | {"origin": "http://evil.example"}, 0) is None
    assert refusal(LIMITS, "POST", "/predict", ok | {"x-request-id": "a" * 128}, 0) is None
    status, key, message = refusal(LIMITS, "POST", "/predict", ok | {"x-request-id": "a" * 129}, 0)
    assert (status, key) == (400, "request_id") and "129 characters; the limit is 128" in message
    assert refusal(LIMITS, "POST", "/predict", ok, 1023) is None
    assert refusal(LIMITS, "POST", "/predict", ok, 1024)[:2] == (503, "pending")


def test_limits_validated_and_recorded_without_the_token():
    with pytest.raises(ConfigError, match="--max-body-bytes 0"):
        EdgeLimits(max_body_bytes=0)
    with pytest.raises(ConfigError, match="16 characters"):
        EdgeLimits(control_token="short")
    limits = EdgeLimits(allow_hosts=("serve.example",), control_token="x" * 20)
    assert limits.answered("10.1.2.3") == {
        "127.0.0.1",
        "localhost",
        "::1",
        "10.1.2.3",
        "serve.example",
    }
    assert (
        refusal(
            limits, "GET", "/healthz", {"host": "10.1.2.3:8000"}, 0, limits.answered("10.1.2.3")
        )
        is None
    )
    assert refusal(limits, "GET", "/healthz", {"host": "10.1.2.3:8000"}, 0)[:2] == (
        421,
        "host",
    )  # bound to loopback
    wildcard = EdgeLimits().answered(
        "0.0.0.0"
    )  # the room's rule: this machine's names and addresses too
    assert {"127.0.0.1", socket.gethostname().lower()} <= wildcard
    assert limits.params("10.1.2.3")["allow_hosts"] == [
        "10.1.2.3",
        "127.0.0.1",
        "::1",
        "localhost",
        "serve.example",
    ]
    assert limits.params()["control_token"] == "set" and "x" * 20 not in json.dumps(limits.params())
    assert (
        token_ok(limits, "x" * 20)
        and not token_ok(limits, "y" * 20)
        and not token_ok(EdgeLimits(), "")
    )
    assert response_bytes(503, "busy", 1) == (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; "
        b"charset=utf-8\r\nContent-Length: 5\r\nConnection: close\r\n"
        b"Retry-After: 1\r\n\r\nbusy\n"
    )


def exchange(addr, data: bytes, *, wait_s: float = 5.0, then: bytes = b"") -> bytes:
    """Send ``data`` (then ``then`` after a pause), read until the server closes or ``wait_s`` passes."""
    with socket.create_connection(addr, timeout=wait_s) as s:
        s.sendall(data)
        if then:
            time.sleep(0.05)
            try:
                s.sendall(then)
            except OSError:
                pass
        out, deadline = b"", time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
        return out


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1]) if response else 0


def post(path, body=b"{}", host="127.0.0.1", extra=""):
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


EDGE_ARGS = (
    "--max-header-bytes",
    "2048",
    "--max-body-bytes",
    "1000",
    "--max-request-id",
    "16",
    "--header-timeout",
    "0.5",
    "--body-timeout",
    "0.5",
    "--max-connections",
    "8",
)


def test_the_edge_of_a_real_server(served):
    server = served(*EDGE_ARGS)
    addr = ("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    good = post("/predict", b'{"x": 3}')
    assert status_of(exchange(addr, good)) == 200
    assert status_of(exchange(addr, post("/predict", b'{"x": 3}', host="evil.example"))) == 421
    assert (
        status_of(exchange(addr, post("/predict", extra="Origin: http://evil.example\r\n"))) == 403
    )
    assert (
        status_of(exchange(addr, post("/shutdown"))) == 403
    )  # no --control-token: the endpoint is off
    assert status_of(exchange(addr, post("/predict", extra=f"X-Request-Id: {'i' * 17}\r\n"))) == 400
    big_head = post("/predict", extra=f"X-Pad: {'p' * 100_000}\r\n")
    started = time.monotonic()
    assert status_of(exchange(addr, big_head)) == 431
    # Content-Length over the limit: refused before a body byte is read; chunked: as the chunks arrive
    assert (
        status_of(
            exchange(
                addr,
                b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000000\r\n\r\n",
            )
        )
        == 413
    )
    chunked = (
        b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        + (b"200\r\n" + b"a" * 512 + b"\r\n") * 3
    )
    assert status_of(exchange(addr, chunked)) == 413
    assert time.monotonic() - started < 5
    # slowloris: a head that never ends, and a body that never comes, get 408 after the timeouts (0.5 s)
    started = time.monotonic()
    assert (
        status_of(exchange(addr, b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: 1\r\n")) == 408
    )
    assert (
        status_of(
            exchange(
                addr, b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n{"
            )
        )
        == 408
    )
    assert time.monotonic() - started < 5
    # connections: 8 idle ones do not lock a client out (the one idle the longest is closed for it) ...
    idle = [socket.create_connection(addr) for _ in range(8)]
    try:
        time.sleep(0.1)
        assert status_of(exchange(addr, good)) == 200
        idle[0].settimeout(3)
        assert idle[0].recv(100) == b""  # evicted
        for s in idle[1:]:  # the other 7 are closed quietly by the head timeout (0.5 s)
            s.settimeout(10)
            assert s.recv(100) == b""
    finally:
        for s in idle:
            s.close()
    # ... 8 busy ones (each in the middle of its head) do: the 9th gets 503 with Retry-After at once
    busy = [socket.create_connection(addr) for _ in range(8)]
    try:
        for s in busy:
            s.sendall(b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.1)
        refused = exchange(addr, good, wait_s=2)
        assert status_of(refused) == 503 and b"Retry-After: 1" in refused
        for s in busy:
            s.settimeout(3)
            assert s.recv(100).startswith(b"HTTP/1.1 408")  # then the head timeout ends them
    finally:
        for s in busy:
            s.close()
    assert status_of(exchange(addr, good)) == 200  # and the server is still well
    code, stdout, stderr = server.stop()
    assert code == 0, stderr
    edge = json.loads((server.out / "run.json").read_text())["serving"]["edge"]
    assert (
        edge["max_body_bytes"] == 1000
        and edge["header_timeout_s"] == 0.5
        and edge["control_token"] is None
    )
    assert edge["refused"] == {
        "body_bytes": 2,
        "body_timeout": 1,
        "connections": 1,
        "control": 1,
        "evicted_idle": 1,
        "header_bytes": 1,
        "header_timeout": 9,
        "host": 1,
        "idle_connection": 7,
        "origin": 1,
        "request_id": 1,
    }


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ("--max-body-bytes", "0"),
            "--max-body-bytes must be an integer in [1, 17_179_869_184] bytes, got 0",
        ),
        (("--header-timeout", "nan"), "--header-timeout must be a number in (0, 86400] s, got nan"),
        (("--control-token", "short"), "--control-token: use at least 16 characters"),
    ],
)
def test_bad_edge_options_are_one_line(args, line):
    from served_helpers import PIPELINE, workbench

    res = workbench("serve", "--pipeline", PIPELINE, "--port", "0", *args)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and line in res.stderr, res.stderr


def test_head_refusal_rules():
    host = [(b"host", b"127.0.0.1:8000")]
    assert head_refusal(LIMITS, "1.1", b"/predict", host) is None
    assert head_refusal(LIMITS, "1.0", b"/predict", host) is None
    assert head_refusal(LIMITS, "2.0", b"/predict", host)[:2] == (505, "version")
    assert head_refusal(LIMITS, "0.9", b"/predict", host)[:2] == (505, "version")
    status, key, message = head_refusal(LIMITS, "1.1", b"/predict", host * 2)
    assert (status, key, message) == (400, "host", "2 Host headers: a request carries exactly one")
    # absolute form: the target's host is the request's (RFC 9112 3.2.2), so it must be answered
    assert head_refusal(LIMITS, "1.1", b"http://127.0.0.1:8000/predict", host) is None
    assert head_refusal(LIMITS, "1.1", b"http://u@[::1]:8000/predict", host) is None
    foreign = head_refusal(LIMITS, "1.1", b"http://evil.example/predict", host)
    assert foreign[:2] == (421, "host") and "'evil.example'" in foreign[2]
    assert head_refusal(LIMITS, "1.1", b"*", host)[:2] == (400, "target")
    assert head_refusal(LIMITS, "1.1", b"ftp://127.0.0.1/x", host)[:2] == (400, "target")
    star = EdgeLimits(allow_hosts=("*",))
    assert head_refusal(star, "1.1", b"http://evil.example/predict", host) is None


def statuses(response: bytes) -> list[int]:
    return [int(s) for s in re.findall(rb"HTTP/1\.1 (\d{3}) ", response)]


def chunked(trailers: bytes) -> bytes:
    head = b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head + b'8\r\n{"x": 3}\r\n0\r\n' + trailers + b"\r\n"


def test_strict_http_trailers_and_pipelining_on_a_real_server(served):
    server = served("--max-header-bytes", "2048", "--max-pipelined", "4")
    addr = ("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    good = post("/predict", b'{"x": 3}')
    assert status_of(exchange(addr, good.replace(b"HTTP/1.1", b"HTTP/2.0", 1))) == 505
    assert status_of(exchange(addr, post("/predict", extra="Host: evil.example\r\n"))) == 400
    absolute = good.replace(b"/predict", b"http://evil.example/predict", 1)
    assert status_of(exchange(addr, absolute)) == 421
    assert status_of(exchange(addr, good.replace(b"/predict", b"http://127.0.0.1/predict"))) == 200
    # a refusal on a kept-alive connection is answered too (after a response it was only closed)
    again = good.replace(b"Connection: close\r\n", b"")
    twice = exchange(addr, again + again.replace(b"HTTP/1.1", b"HTTP/2.0", 1))
    assert statuses(twice) == [200, 505]
    # trailers count against the head limit (2048): a few pass; many lines, or one endless line, do not
    assert status_of(exchange(addr, chunked(b"X-T: 1\r\n"))) == 200
    assert status_of(exchange(addr, chunked(b"X-T: 1\r\n" * 400))) == 431
    assert status_of(exchange(addr, chunked(b"X-T: " + b"t" * 2_000_000 + b"\r\n"))) == 431
    # pipelining: 4 requests may wait behind the one in flight; past that, the one in flight is
    # answered, then 503 for the rest, and the connection closes (nothing more is read from it)
    assert statuses(exchange(addr, again * 5)) == [200] * 5
    burst = exchange(addr, again * 40)
    assert statuses(burst) == [200, 503] and b"Retry-After: 1" in burst
    assert b"only the first was answered" in burst
    code, stdout, stderr = server.stop()
    assert code == 0, stderr
    refused = json.loads((server.out / "run.json").read_text())["serving"]["edge"]["refused"]
    assert refused == {"header_bytes": 2, "host": 2, "pipelined": 1, "version": 2}


def connect(addr, source: str = "127.0.0.1") -> socket.socket:
    """A connection from ``source`` (any 127.0.0.0/8 address is this machine: another client)."""
    return socket.create_connection(addr, timeout=10, source_address=(source, 0))


def closed(s: socket.socket, within_s: float = 3.0) -> bool:
    """Whether the server closes ``s`` within ``within_s`` (what it sent before is read and dropped)."""
    s.settimeout(within_s)
    try:
        while s.recv(65536):
            pass
    except (ConnectionResetError, socket.timeout):
        return False
    return True


def reply(s: socket.socket, request: bytes) -> bytes:
    """Send ``request`` on ``s`` and read its whole response (framed by Content-Length)."""
    s.sendall(request)
    s.settimeout(10)
    out = b""
    while b"\r\n\r\n" not in out or len(out.split(b"\r\n\r\n", 1)[1]) < int(
        re.search(rb"(?i)content-length: (\d+)", out).group(1)
    ):
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    return out


def test_connection_slots_are_shared_fairly(served):
    server = served("--max-connections", "4", "--max-client-connections", "2")
    addr = ("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    kept = post("/predict", b'{"x": 3}').replace(b"Connection: close\r\n", b"")
    head = b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    probe = connect(addr)
    assert status_of(reply(probe, kept)) == 200  # a client between two requests on one connection
    # per client: a third connection of 127.0.0.2 closes its own silent one, or is refused when
    # both are busy (mid-head)
    silent = [connect(addr, "127.0.0.2") for _ in range(2)]
    time.sleep(0.1)
    third = connect(addr, "127.0.0.2")
    assert closed(silent[0])
    third.sendall(head)
    silent[1].sendall(head)
    time.sleep(0.1)
    with connect(addr, "127.0.0.2") as s:
        refused = reply(s, kept)
    assert status_of(refused) == 503 and b"Retry-After: 1" in refused
    assert b"the limit is 2 (--max-client-connections)" in refused
    # at the server's limit (4), silent connections of other clients go before a client between two
    # requests: 127.0.0.3's is closed for 127.0.0.4's, never the probe's (the one idle the longest)
    other = connect(addr, "127.0.0.3")
    time.sleep(0.1)
    newcomer = connect(addr, "127.0.0.4")
    assert closed(other)
    assert status_of(reply(probe, kept)) == 200
    assert status_of(reply(newcomer, kept)) == 200
    # heads still arriving after a second (slowloris) give up their slots before such a client
    # does, all the stalled ones at once (one scan for up to 32 newcomers in a flood)
    time.sleep(1.0)
    with connect(addr, "127.0.0.5") as late:
        assert status_of(reply(late, post("/predict", b'{"x": 3}'))) == 200
    assert closed(silent[1]) and closed(third)
    assert status_of(reply(probe, kept)) == 200 and status_of(reply(newcomer, kept)) == 200
    for s in (probe, *silent, third, newcomer):
        s.close()
    code, _, stderr = server.stop()
    assert code == 0, stderr
    refused = json.loads((server.out / "run.json").read_text())["serving"]["edge"]["refused"]
    assert refused == {"client_connections": 1, "evicted_idle": 2, "evicted_slow_head": 2}


def test_a_client_that_never_reads_its_responses_is_cut_off(served):
    server = served("--send-timeout", "0.5", "--max-pipelined", "100000")
    addr = ("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # its responses back up soon
        s.connect(addr)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 50_000)  # kernel-buffered
        deadline, error = time.monotonic() + 30, 0
        while not error and time.monotonic() < deadline:  # read nothing: only the socket's error
            time.sleep(0.1)
            error = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    assert error == errno.ECONNRESET  # aborted by the server (it waited for ever before)
    assert status_of(exchange(addr, post("/predict", b'{"x": 3}'))) == 200
    code, _, stderr = server.stop()
    assert code == 0, stderr
    refused = json.loads((server.out / "run.json").read_text())["serving"]["edge"]["refused"]
    assert refused == {"send_timeout": 1}


def test_a_client_refused_again_and_again_has_its_new_connections_held(served):
    server = served("--max-header-bytes", "2048", "--client-strikes", "3", "--client-penalty", "1")
    addr = ("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    good = post("/predict", b'{"x": 3}')
    oversized = good.replace(b"Host:", b"X-Pad: " + b"p" * 4000 + b"\r\nHost:", 1)
    before = connect(addr, "127.0.0.2")  # open, silent, when the penalty starts: held too
    for _ in range(3):  # three 431s within a second: 127.0.0.2 is penalized
        with connect(addr, "127.0.0.2") as s:
            s.sendall(oversized)
            assert status_of(s.recv(65536)) == 431
    held = connect(addr, "127.0.0.2")
    for s in (held, before):
        s.sendall(good)
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):  # nothing is read from it, so nothing is answered
            s.recv(65536)
    before.close()
    with connect(addr, "127.0.0.1") as other:  # another client is answered as ever
        assert status_of(reply(other, good)) == 200
    held.settimeout(
        3.0
    )  # when the penalty ends it is closed, unanswered (reset: its request unread)
    with pytest.raises(ConnectionResetError):
        held.recv(65536)
    held.close()
    with connect(addr, "127.0.0.2") as again:  # and the client is answered again
        assert status_of(reply(again, good)) == 200
    code, _, stderr = server.stop()
    assert code == 0, stderr
    refused = json.loads((server.out / "run.json").read_text())["serving"]["edge"]["refused"]
    assert refused == {"client_penalized": 1, "client_penalty": 2, "header_bytes": 3}


@pytest.mark.skipif(
    shutil.which("ss") is None, reason="needs ss (iproute2) to read the listen queue"
)
def test_the_listen_queue_is_the_accept_backlog_while_a_turn_takes_few(served):
    """asyncio listens with its per-turn accept count (16 here); the kernel's queue is re-set after."""
    server = served("--accept-backlog", "300")
    port = server.url.rsplit(":", 1)[1]
    deadline, queue = time.monotonic() + 10, None
    while queue != "300" and time.monotonic() < deadline:
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
        queue = out.stdout.split()[2] if out.stdout.split() else None
        time.sleep(0.05)
    assert queue == "300"
    assert server.stop()[0] == 0
