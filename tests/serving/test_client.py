"""The load generator against real local servers: exact results per request, keep-alive reuse, the
pool's limit, failures (a 500, a server that hangs up, a timeout, no server), and the send schedule
(wake early, spin to the due time, lag = send - due)."""

import asyncio
import http.server
import json
import threading
import time

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench_serve.client import (
    Result,
    Schedule,
    Target,
    decoded_health,
    drive,
    response_result,
)
from workbench_serve.http1 import Response, ServerDisconnected
from scripted_server import Scripted, reply
from served_helpers import free_port


class Handler(http.server.BaseHTTPRequestHandler):
    """``POST /predict``: ``{"x": k}`` -> 200 with Server-Timing; ``x == -1`` a 500 naming the stage;
    ``plain`` a 500 without JSON; ``close`` hangs up without answering; ``slow`` sleeps 1 s."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = (
        True  # one segment per response: no delayed-ACK stalls on reused sockets
    )

    def do_POST(self):
        server = self.server
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with server.lock:
            server.seen.append((self.client_address[1], self.headers.get("X-Request-Id"), body))
        time.sleep(server.delay_s)
        if body in (b"close", b"slow"):
            time.sleep(1.0 if body == b"slow" else 0)
            self.close_connection = True
            return
        if body == b"plain":
            return self._reply(500, b"boom", {})
        x = json.loads(body)["x"]
        if x == -1:
            return self._reply(
                500,
                json.dumps(
                    {"stage": "forward", "type": "ValueError", "error": "x=-1 is poison"}
                ).encode(),
                {},
            )
        self._reply(
            200,
            json.dumps({"y": 2 * x}).encode(),
            {
                "Server-Timing": "forward;dur=1.500000, total;dur=2.000000",
                "X-Workbench-Batch": "7",
                "X-Workbench-Batch-Size": "2",
            },
        )

    def _reply(self, status, body, headers):
        self.send_response(status)
        for k, v in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(k, v)
        if self.server.close_each:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads, block_on_close = True, False

    def verify_request(self, request, client_address):
        with self.lock:
            self.accepted += 1  # connections accepted
        return True


@pytest.fixture
def server():
    srv = Server(("127.0.0.1", 0), Handler)
    srv.seen, srv.lock, srv.delay_s, srv.close_each, srv.accepted = (
        [],
        threading.Lock(),
        0.0,
        False,
        0,
    )
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_each_outcome_is_recorded_exactly(server):
    payloads = [b'{"x": 1}', b"close", b'{"x": -1}', b"plain"]
    d = drive(server.url, payloads, np.arange(4, dtype=np.int64) * 2_000_000, tag="t", warmup=1)
    ok, hung_up, failed, plain = d.results
    assert (ok.status, ok.error, ok.server_stages, ok.server_total_ns) == (
        200,
        None,
        [("forward", 1_500_000)],
        2_000_000,
    )
    assert (ok.batch, ok.batch_size, ok.cache_hit) == (7, 2, None)
    assert (hung_up.status, hung_up.error) == (
        None,
        (
            "network",
            "ServerDisconnected",
            "the server closed the connection before the response was complete",
        ),
    )
    assert (failed.status, failed.error) == (500, ("forward", "ValueError", "x=-1 is poison"))
    assert (plain.status, plain.error) == (500, ("server", "HTTP500", "boom"))
    assert [r.request_id for r in d.results] == ["t-0", "t-1", "t-2", "t-3"]
    # the server saw the warm-up (no id) then the schedule, each id once, bodies as given
    assert server.seen[0][1:] == (None, b'{"x": 1}')
    assert sorted(seen[1:] for seen in server.seen[1:]) == [
        (f"t-{k}", p) for k, p in enumerate(payloads)
    ]
    assert (
        d.server_before is None and d.server_after is None
    )  # no /healthz here: not a workbench server
    # lag is the send minus the due time, never negative (the send spins up to its due time)
    assert d.lags_ns.tolist() == [r.sent_ns - r.due_ns for r in d.results]
    assert all(r.sent_ns >= r.due_ns for r in d.results)
    assert [r.due_ns - d.origin_ns for r in d.results] == [0, 2_000_000, 4_000_000, 6_000_000]


def test_keep_alive_connections_are_reused_up_to_the_limit(server):
    d = drive(
        server.url,
        [b'{"x": 3}'],
        np.arange(30, dtype=np.int64) * 1_000_000,
        warmup=2,
        connections=3,
    )
    assert all(r.status == 200 and r.error is None for r in d.results)
    # 32 requests on the 3 connections of the pool (opened before the schedule), plus the first one, which
    # http.server closed after answering GET /healthz with 501 and Connection: close
    assert server.accepted == 4
    assert len(server.seen) == 32


def test_a_server_that_closes_after_each_response_gets_a_fresh_connection_each_time(server):
    server.close_each = True
    d = drive(
        server.url, [b'{"x": 3}'], np.arange(8, dtype=np.int64) * 3_000_000, warmup=1, connections=4
    )
    assert [r.status for r in d.results] == [200] * 8
    per_conn = {}
    for conn, _, _ in server.seen:
        per_conn[conn] = per_conn.get(conn, 0) + 1
    assert set(per_conn.values()) == {1}  # never a second request on a connection the server closed


def test_pool_wait_counts_as_lag(server):
    server.delay_s = 0.05
    schedule = (
        np.arange(6, dtype=np.int64) * 1_000_000
    )  # 6 requests 1 ms apart, 2 connections, 50 ms each
    d = drive(server.url, [b'{"x": 0}'], schedule, warmup=1, connections=2)
    waits, lags = [r.pool_wait_ns for r in d.results], d.lags_ns.tolist()
    assert waits[:2] == [0, 0] and all(
        w > 0 for w in waits[2:]
    )  # the third on waited for a free connection
    assert all(
        lag >= 45_000_000 for lag in lags[2:]
    )  # none went out before a 50 ms reply freed a connection
    assert all(lag >= w for lag, w in zip(lags, waits))
    assert all(r.status == 200 for r in d.results)
    assert [r.request_id for r in d.results] == [f"wb-{k}" for k in range(6)]


def test_a_request_past_the_timeout_fails_and_the_run_goes_on(server):
    d = drive(
        server.url,
        [b'{"x": 0}', b"slow", b'{"x": 2}'],
        np.arange(3, dtype=np.int64) * 1_000_000,
        warmup=1,
        timeout_s=0.2,
    )
    assert [r.status for r in d.results] == [200, None, 200]
    assert d.results[1].error == ("network", "TimeoutError", "no complete response within 0.2 s")
    assert d.results[1].done_ns - d.results[1].sent_ns >= 200_000_000  # never before the timeout


def test_unreachable_is_a_config_error_before_any_timing():
    port = free_port()
    with pytest.raises(ConfigError) as info:
        drive(f"http://127.0.0.1:{port}", [b"x"], np.zeros(3, dtype=np.int64), warmup=1)
    assert str(info.value) == (
        f"--url http://127.0.0.1:{port}: cannot connect ([Errno 111] Connect call failed "
        f"('127.0.0.1', {port})); is the server running (python -m workbench serve ...) "
        "and is the address right?"
    )


def test_a_server_that_hangs_up_on_the_warm_up_is_a_config_error(server):
    with pytest.raises(ConfigError) as info:
        drive(server.url, [b"close"], np.zeros(1, dtype=np.int64), warmup=1)
    assert str(info.value) == (
        f"--url {server.url}: the server closed the connection before the response was "
        "complete (a warm-up request)"
    )


@pytest.mark.parametrize(
    "url, message",
    [
        ("ftp://h:1", "--url 'ftp://h:1': expected http://HOST:PORT"),
        ("http://h:99999", "--url 'http://h:99999': the port is not a number from 0 to 65535"),
    ],
)
def test_bad_urls(url, message):
    with pytest.raises(ConfigError) as info:
        Target.from_url(url)
    assert str(info.value) == message


class FakePool:
    def __init__(self, clock):
        self.clock, self.sent = clock, []

    def submit(self, data, done):
        self.sent.append((data, self.clock.last))
        return self.clock.last


class Readings:
    def __init__(self, values):
        self.values, self.last = iter(values), None

    def __call__(self):
        self.last = next(self.values)
        return self.last


def test_the_schedule_wakes_a_spin_early_and_spins_to_the_due_time():
    clock = Readings(
        [
            900_000,
            950_000,
            1_000_000,
            1_100_000,  # first wake: spin to 1.0 ms, send, re-arm
            1_850_000,
            1_950_000,
            2_000_050,  # second wake: spin past 2.0 ms, send
            5_000_000,
            9_000_000,
        ]
    )  # when the two requests end
    pool = FakePool(clock)
    s = Schedule(
        pool,
        Target.from_url("http://h:1/api"),
        [b"ab"],
        [0, 1_000_000],
        "t",
        clock,
        spin_ns=200_000,
    )
    s.origin_ns, delays = 1_000_000, []
    s.call_later = lambda delay, fn: delays.append(delay)
    loop = asyncio.new_event_loop()
    s.finished = loop.create_future()
    loop.close()
    s._fire()
    assert delays == [0.0007]  # (due 2.0 ms - now 1.1 ms - spin 0.2 ms), in seconds
    s._fire()
    assert [at for _, at in pool.sent] == [
        1_000_000,
        2_000_050,
    ]  # the first reading at or past each due time
    assert pool.sent[0][0] == (
        b"POST /api/predict HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/octet-stream\r\n"
        b"X-Request-Id: t-0\r\nContent-Length: 2\r\n\r\nab"
    )
    s._done(
        0,
        1_000_000,
        Response(
            200, {"server-timing": "forward;dur=1.000000, total;dur=1.500000"}, b"{}", 4_000_000
        ),
    )
    s.queued[1] = 2_000_050
    s._done(1, None, ServerDisconnected("gone"))
    assert s.finished.done()
    assert s.result(0) == Result(
        "t-0",
        1_000_000,
        1_000_000,
        4_000_000,
        200,
        server_stages=[("forward", 1_000_000)],
        server_total_ns=1_500_000,
    )
    assert s.result(1) == Result(
        "t-1",
        2_000_000,
        9_000_000,
        9_000_000,
        None,
        ("network", "ServerDisconnected", "gone"),
        pool_wait_ns=6_999_950,
    )  # never sent: it waited from 2.00005 ms until it failed


def test_a_request_queued_for_a_connection_past_the_timeout_fails_unsent():
    from workbench_serve.http1 import Pool

    got = []

    async def main():
        pool = Pool("127.0.0.1", 1, limit=1, clock=Readings([1_300_000_000]))
        pool.waiting.extend(
            [
                (b"a", lambda *a: got.append(a), 1_000_000_000),
                (b"b", lambda *a: got.append(a), 1_200_000_000),
            ]
        )
        pool.expire(200_000_000)
        return pool

    pool = asyncio.run(main())
    assert [(sent, type(exc).__name__, str(exc)) for sent, exc in got] == [
        (None, "TimeoutError", "no free connection within 0.2 s")
    ]  # the second has waited 0.1 s only
    assert [data for data, _, _ in pool.waiting] == [b"b"]


def test_requests_queued_while_nothing_listens_each_fail_with_the_connect_error():
    from workbench_serve.http1 import Pool

    async def main():
        pool, got = Pool("127.0.0.1", free_port(), limit=2, clock=time.perf_counter_ns), []
        finished = asyncio.get_running_loop().create_future()

        def done(sent, outcome):
            got.append((sent, type(outcome).__name__))
            if len(got) == 3:
                finished.set_result(None)

        assert [pool.submit(b"x", done) for _ in range(3)] == [
            None,
            None,
            None,
        ]  # no connection yet: queued
        await asyncio.wait_for(finished, 10)
        await pool.close()
        return got, pool.open_count

    got, still_open = asyncio.run(main())
    assert got == [(None, "ConnectionRefusedError")] * 3 and still_open == 0


def test_a_read_arriving_after_a_due_time_sends_first():
    clock = Readings(
        [
            900_000,
            950_000,
            1_000_000,
            1_100_000,  # first wake: send request 0, re-arm
            1_500_000,  # a read at 1.5 ms: request 1 (due 2 ms) waits
            2_000_010,
        ]
    )  # a read at 2.00001 ms: request 1 goes, no spin
    pool = FakePool(clock)
    s = Schedule(
        pool, Target.from_url("http://h:1"), [b"ab"], [0, 1_000_000], "t", clock, spin_ns=200_000
    )
    s.origin_ns, delays = 1_000_000, []
    s.call_later = lambda delay, fn: delays.append(delay)
    s._fire()
    s._send_due()
    assert [at for _, at in pool.sent] == [1_000_000]
    s._send_due()
    assert [at for _, at in pool.sent] == [1_000_000, 2_000_010] and s.k == 2
    s._fire()  # the timer armed for request 1 finds nothing left to send
    assert delays == [0.0007]


class FakeTransport:
    def __init__(self):
        self.written, self.closed = [], False

    def write(self, data):
        self.written.append(data)

    def close(self):
        self.closed = True


def test_a_connection_lets_due_sends_go_before_it_parses_a_read_then_idles():
    from workbench_serve.http1 import Connection, Pool

    calls = []

    async def main():
        pool = Pool("h", 1, limit=1, clock=Readings([10, 20]))
        pool.before_read = lambda: calls.append("sends due")
        conn, transport = Connection(pool), FakeTransport()
        conn.connection_made(transport)
        pool.idle.append(conn)
        assert (
            pool.submit(b"req", lambda sent, r: calls.append((sent, r.status, r.body, r.done_ns)))
            == 10
        )
        conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        return pool, conn, transport

    pool, conn, transport = asyncio.run(main())
    assert transport.written == [b"req"] and not transport.closed
    assert calls == ["sends due", (10, 200, b"ok", 20)]  # sent at 10 ns, read at 20 ns
    assert pool.idle == [conn] and not pool.busy


# -- https ---------------------------------------------------------------------------------
@pytest.fixture
def tls_server(server, tmp_path):
    """The same server behind TLS, with a fresh self-signed certificate for 127.0.0.1 (``server.cert``)."""
    import shutil
    import ssl
    import subprocess

    if not shutil.which("openssl"):
        pytest.skip("the openssl command is missing (Debian package 'openssl')")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.url, server.cert = server.url.replace("http://", "https://"), cert
    return server


def test_https_is_driven_like_http_when_the_certificate_is_trusted(tls_server, monkeypatch):
    monkeypatch.setenv(
        "SSL_CERT_FILE", str(tls_server.cert)
    )  # OpenSSL's standard way to trust a private CA
    d = drive(
        tls_server.url,
        [b'{"x": 1}', b'{"x": -1}'],
        np.arange(2, dtype=np.int64) * 2_000_000,
        tag="s",
        warmup=1,
    )
    ok, failed = d.results
    assert (ok.status, ok.error, ok.server_stages, ok.server_total_ns) == (
        200,
        None,
        [("forward", 1_500_000)],
        2_000_000,
    )
    assert (failed.status, failed.error) == (500, ("forward", "ValueError", "x=-1 is poison"))
    assert sorted(seen[1:] for seen in tls_server.seen[1:]) == [
        ("s-0", b'{"x": 1}'),
        ("s-1", b'{"x": -1}'),
    ]


def test_an_untrusted_certificate_is_a_config_error_that_says_how_to_trust_it(
    tls_server, monkeypatch
):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(ConfigError) as info:
        drive(tls_server.url, [b'{"x": 1}'], np.zeros(1, dtype=np.int64), warmup=1)
    head, _, reason = str(info.value).partition(" (")
    assert head == f"--url {tls_server.url}: the server's TLS certificate was not accepted"
    assert (
        "self" in reason and "signed" in reason
    )  # OpenSSL's words: "self-signed certificate" (3.x)
    assert reason.endswith(
        "); a server whose certificate comes from a private CA is trusted with "
        "SSL_CERT_FILE=/path/to/ca.pem"
    )


def test_https_to_a_plain_http_server_is_a_config_error(server):
    url = server.url.replace("http://", "https://")
    with pytest.raises(ConfigError) as info:
        drive(url, [b'{"x": 1}'], np.zeros(1, dtype=np.int64), warmup=1)
    message = str(info.value)  # the reason in between is OpenSSL's (WRONG_VERSION_NUMBER in 3.x)
    assert message.startswith(f"--url {url}: the TLS handshake failed (") and message.endswith(
        "); is it an https server?"
    )


def test_healthz_values_are_decoded_with_their_ranges():
    body = {
        "cpu_s": 2.5,
        "stages": ["ingress", "forward"],
        "pipeline": "p",
        "policy": {"max_batch_size": 4, "max_wait_ms": 1.0, "concurrency": 1, "extra": 1},
        "config": {"batch_size": 1},
        "status": "ok",
    }
    assert decoded_health(json.dumps(body).encode()) == {
        "cpu_s": 2.5,
        "stages": ["ingress", "forward"],
        "pipeline": "p",
        "config": {"batch_size": 1, "options": {}, "threads": None},
        "policy": {"max_batch_size": 4, "max_wait_ms": 1.0, "concurrency": 1},
        "notes": [],
    }
    bad = {"cpu_s": "abc", "stages": ["a", "a"], "pipeline": 7, "config": {"batch_size": 0}}
    got = decoded_health(json.dumps(bad).encode())
    assert got == {
        "notes": [
            '/healthz cpu_s "abc" is not a number of seconds from 0 to 1e9: left out',
            '/healthz stages ["a", "a"] is not a list of distinct stage names: left out',
            "/healthz pipeline 7 is not a name: left out",
            '/healthz config {"batch_size": 0} is not a pipeline config: left out',
        ]
    }
    for body in (b'{"cpu_s": NaN}', b"[1]", b"not json", b"[" * 100_000):
        assert decoded_health(body) is None


def test_a_status_outside_100_to_599_is_a_failure_of_its_request():
    r = response_result("t-0", 0, 1, 2, 2000, {"server-timing": "total;dur=0.001"}, b"ok")
    assert (r.status, r.error, r.server_total_ns) == (
        None,
        ("network", "BadResponse", "HTTP status 2000 is not from 100 to 599"),
        None,
    )


def test_the_timeout_bounds_a_whole_response_sent_one_byte_at_a_time():
    server = Scripted(reply(), drip_s=0.5)  # ~20 s a response; each read gets a byte in time
    d = drive(server.url, [b"x"], np.arange(3, dtype=np.int64) * 10_000_000, warmup=0, timeout_s=1)
    assert [r.error[1] for r in d.results] == ["TimeoutError"] * 3


# -- event streams (a served generative pipeline) -------------------------------------------
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
END = b'event: end\ndata: {"status":200,"server_timing":"gen;dur=1, total;dur=2","body":"{}"}\n\n'


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def test_each_unit_is_timed_by_the_read_that_completes_it():
    from workbench_serve.http1 import Connection, Pool

    calls = []

    async def main():
        pool = Pool("h", 1, limit=1, clock=Readings([10, 20, 30, 40, 50, 60, 70]))
        conn, transport = Connection(pool), FakeTransport()
        conn.connection_made(transport)
        pool.idle.append(conn)
        pool.submit(b"req", lambda sent, r: calls.append((sent, r.status, r.events, r.done_ns)))
        conn.data_received(SSE_HEAD + chunk(b"data: 1\n\ndata:"))  # 20: unit 0, half of unit 1
        conn.data_received(chunk(b" 2\n"))  # 30: still half
        conn.data_received(chunk(b"\n") + chunk(END) + b"0\r\n")  # 40: unit 1 and the end
        conn.data_received(b"\r\n")  # 50: the response's last bytes
        pool.submit(b"again", lambda *a: calls.append(a))  # 60: sent
        conn.data_received(SSE_HEAD + chunk(b"data: 7\n\n"))  # 70: a unit, then the cut
        conn.connection_lost(None)

    asyncio.run(main())
    (sent, status, events, done), (sent2, cut, events2) = calls
    assert (sent, status, done) == (10, 200, 50)
    assert [(at, name) for at, name, _ in events] == [(20, ""), (40, ""), (40, "end")]
    assert [data for _, _, data in events] == ["", "", END[17:-2].decode()]  # the end's data only
    assert sent2 == 60 and isinstance(cut, ServerDisconnected) and events2 == [(70, "", "")]


class SseHandler(http.server.BaseHTTPRequestHandler):
    """A plain SSE server: every ``POST`` streams units 1 and 2 (unit 2 split across two writes 5 ms
    apart) then the end event; a body ``cut`` stops after unit 2 and half of unit 3 and hangs up."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):
        cut = self.rfile.read(int(self.headers["Content-Length"])) == b"cut"
        self.wfile.write(SSE_HEAD + chunk(b"data: 1\n\n") + chunk(b"data: 2"))
        self.wfile.flush()
        time.sleep(0.005)
        if cut:
            self.wfile.write(chunk(b"\n\n") + chunk(b"data: 3"))
            self.close_connection = True
        else:
            self.wfile.write(chunk(b"\n\n") + chunk(END) + b"0\r\n\r\n")

    def log_message(self, *args):
        pass


def test_a_plain_sse_server_gives_units_and_a_cut_stream_keeps_its_units(tmp_path):
    from workbench.analysis.tokens import token_summary
    from workbench.batching.arrivals import Arrivals
    from workbench_serve.loadrun import run_http_load

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SseHandler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    path = tmp_path / "arrivals.csv"
    path.write_text("arrival_ns\n" + "\n".join(str(k * 20_000_000) for k in range(4)) + "\n")
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        run = run_http_load(
            url, [b"ok", b"cut"], Arrivals("replay", path=str(path)), warmup=1, ttft_ms=1e6
        )
    finally:
        srv.shutdown()
        srv.server_close()
    req, units = run.requests, run.units
    assert req["ok"].tolist() == [True, False, True, False]
    assert req["error_type"].tolist()[1::2] == ["ServerDisconnected"] * 2
    # two units each, the cut ones' too (its half unit 3 is none); the server named no stage
    assert units["request"].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert set(units["stage"]) == {"stream"} and units["unit"].tolist() == [0, 1] * 4
    starts = req.set_index("request")["start_ns"]  # the due times: TTFT runs from them
    assert (units.groupby("request")["at_ns"].min() > starts).all()
    extra = run.meta.serving.extra
    assert extra["streams"] == {
        "requests": 4,
        "units": 8,
        "failed_requests": 2,
        "failed_units": 4,
    }
    assert extra["goodput"] == {
        "ttft_ms": 1e6,
        "tpot_ms": None,
        "requests": 4,
        "good": 2,  # the cut streams are not good
        "share": 0.5,
    }
    tokens = token_summary(req, run.stages, units)
    assert (tokens["requests"], tokens["tokens"], tokens["ttft"]["count"]) == (2, 4, 2)
    assert tokens["itl"]["count"] == 2 and tokens["prefill"]["count"] == 0  # no Server-Timing rows
