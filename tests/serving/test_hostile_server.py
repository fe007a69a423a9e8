"""load --url against a deliberately broken server (loopback): every bad response is a named failure of its
own request, the run ends within its timeout, and a server that goes away mid-run loses no answered request."""

import json
import signal
import socket
import threading
import time

import numpy as np
import pytest

from tests.support.cli import load_url, started
from workbench_serve.client import drive
from workbench_serve.http1 import (
    BadChunk,
    BadResponse,
    BodyTooLarge,
    HeadTooLarge,
    ResponseParser,
    TooManyInterim,
)
from workbench_serve.protocol import parse_server_timing

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nServer-Timing: total;dur=0.1\r\n\r\nok"
REPLIES = {
    b"ok": OK,
    b"neg": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nabc\r\n",
    b"bigchunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffff\r\nabc",
    b"inf": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nServer-Timing: total;dur=inf\r\n\r\nok",
    b"negtime": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nServer-Timing: a;dur=-5, total;dur=0.1\r\n\r\nok",
    b"batch": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Workbench-Batch: "
    + b"9" * 5000
    + b"\r\n\r\nok",
    b"short": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokay!",
    b"flood": b"HTTP/1.1 100 Continue\r\n\r\n" * 5000 + OK,
    b"bighead": b"HTTP/1.1 200 OK\r\nX-Pad: " + b"p" * 200_000 + b"\r\nContent-Length: 2\r\n\r\nok",
    b"bigbody": b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\nabc",
}


class Hostile:
    """A raw HTTP/1.1 server on loopback: replies REPLIES[body]; after ``answer`` requests it closes every
    socket and stops listening (a crash)."""

    def __init__(
        self, answer: int = 10**9, silent_after: int = 10**9, refuse_after_conns: int = 10**9
    ):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.answer, self.answered, self.conns, self.lock = answer, 0, [], threading.Lock()
        self.silent_after = silent_after  # read requests but answer none past this many
        self.refuse_after_conns = (
            refuse_after_conns  # later connections get a 503 at connect, then close
        )
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if len(self.conns) > self.refuse_after_conns:  # as serve's edge past --max-connections
                conn.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n"
                    b"Retry-After: 1\r\n\r\n"
                )
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = int(
                    next(
                        (
                            ln.split(b":")[1]
                            for ln in head.split(b"\r\n")
                            if ln.lower().startswith(b"content-length")
                        ),
                        b"0",
                    )
                )
                while len(buf) < length:
                    buf += conn.recv(65536)
                body, buf = buf[:length], buf[length:]
                with self.lock:
                    self.answered += 1
                    if self.answered > self.answer:
                        self.crash()
                        return
                    if self.answered > self.silent_after:
                        continue
                conn.sendall(
                    REPLIES.get(body, OK)
                    if head.startswith(b"POST")
                    else b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
                )
        except OSError:
            return

    def crash(self):
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass


@pytest.mark.parametrize(
    "raw, kind, text",
    [
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nabc\r\n",
            BadChunk,
            "not hexadecimal",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\nabc\r\n",
            BadChunk,
            "not hexadecimal",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nabc\r\n",
            BadChunk,
            "not hexadecimal",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffff\r\n",
            BodyTooLarge,
            "over the limit",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            BodyTooLarge,
            "over the limit",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", Exception, "is not a number"),
        (b"HTTP/1.1 100 Continue\r\n\r\n" * 33, TooManyInterim, "more than 32 interim"),
        (
            b"HTTP/1.1 200 OK\r\nX: " + b"p" * 70_000 + b"\r\n\r\n",
            HeadTooLarge,
            "no end of the response head",
        ),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 300 + b"\r\n", HeadTooLarge, "301 lines"),
        (b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", BadResponse, "from 100 to 599"),
        (b"HTTP/1.1 099 X\r\nContent-Length: 0\r\n\r\n", BadResponse, "from 100 to 599"),
        (b"HTTP/1.1 600\r\nContent-Length: 0\r\n\r\n", BadResponse, "from 100 to 599"),
    ],
)
def test_the_parser_bounds_everything_it_holds(raw, kind, text):
    with pytest.raises(kind, match=text):
        ResponseParser().feed(raw)


def test_a_body_to_the_end_of_the_connection_is_bounded():
    p = ResponseParser(max_body_bytes=10)
    p.feed(b"HTTP/1.0 200 OK\r\n\r\n12345")
    with pytest.raises(BodyTooLarge):
        p.feed(b"678901")


@pytest.mark.parametrize(
    "value",
    [
        "total;dur=inf",
        "total;dur=nan",
        "total;dur=1e300",
        "a;dur=-5, total;dur=1",
        ",".join(["a;dur=1"] * 300),
    ],
)
def test_server_timing_outside_a_duration_is_refused(value):
    with pytest.raises(ValueError):
        parse_server_timing(value)


def test_each_bad_response_is_a_named_failure_and_the_run_ends():
    server = Hostile()
    names = list(REPLIES)
    started = time.monotonic()
    d = drive(
        server.url,
        [bytes(n) for n in names],
        np.arange(len(names), dtype=np.int64) * 5_000_000,
        tag="h",
        warmup=1,
        timeout_s=3,
    )
    assert time.monotonic() - started < 15
    got = {n: (r.status, r.error[1] if r.error else None) for n, r in zip(names, d.results)}
    assert got == {
        b"ok": (200, None),
        b"neg": (None, "BadChunk"),
        b"bigchunk": (None, "BodyTooLarge"),
        b"inf": (200, "BadServerTiming"),
        b"negtime": (200, "BadServerTiming"),
        b"batch": (200, "BadHeader"),
        b"short": (None, "ExtraBytes"),
        b"flood": (None, "TooManyInterim"),
        b"bighead": (None, "HeadTooLarge"),
        b"bigbody": (None, "BodyTooLarge"),
    }
    batch = d.results[names.index(b"batch")]
    assert (batch.batch, batch.batch_size) == (-1, 1)
    assert all(
        r.server_total_ns is None for r in d.results if r.error
    )  # nothing bad joins the budget
    server.crash()


def test_a_server_that_goes_away_mid_run_keeps_every_answered_request():
    server = Hostile(answer=2 + 20)  # /healthz, the warm-up, then 20 of the 60 scheduled requests
    d = drive(
        server.url,
        [b"ok"],
        np.arange(60, dtype=np.int64) * 5_000_000,
        tag="g",
        warmup=1,
        timeout_s=3,
    )
    ok = [r for r in d.results if r.error is None]
    assert len(d.results) == 60 and len(ok) == 20
    assert all(r.error[0] == "network" for r in d.results if r.error)
    assert {r.error[1] for r in d.results if r.error} <= {
        "ServerDisconnected",
        "ConnectionRefusedError",
        "ConnectionResetError",
    }


def test_ctrl_c_ends_a_run_whose_server_never_answers_and_saves_it(tmp_path):
    server = Hostile(silent_after=1 + 5)  # /healthz and the 5 warm-up requests, then silence
    (tmp_path / "p.txt").write_text("ok\n")
    out = tmp_path / "client"
    flags = ["--rate", "50", "--duration", "30", "--timeout", "60"]
    load = started(*load_url(server.url, tmp_path / "p.txt", out, *flags))
    deadline = time.monotonic() + 60
    while server.answered < 12 and time.monotonic() < deadline:  # the schedule is running
        time.sleep(0.05)
    load.send_signal(signal.SIGINT)
    stopped = time.monotonic()
    stdout, stderr = load.communicate(timeout=30)
    assert time.monotonic() - stopped < 10, "Ctrl-C did not end the run promptly"
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["load"]["requests"] >= 5
    assert meta["load"]["failed"] == meta["load"]["requests"]  # every one abandoned after the grace
    server.crash()


def test_connections_refused_at_connect_fail_their_requests_with_sane_times():
    """A 503 sent at connect (serve's connection limit) reached a connection as a send went out on it: the
    response was taken for that request's, ending before it was sent (a negative duration the record refused)."""
    server = Hostile(refuse_after_conns=2)
    d = drive(
        server.url,
        [b"ok"],
        np.arange(200, dtype=np.int64) * 1_000_000,
        tag="r",
        warmup=1,
        timeout_s=3,
        connections=64,
    )
    assert len(d.results) == 200 and any(r.error is None for r in d.results)
    assert all(r.done_ns >= r.sent_ns for r in d.results)
    assert {r.error[1] for r in d.results if r.error} <= {
        "HTTP503",
        "ExtraBytes",
        "ServerDisconnected",
        "ConnectionResetError",
    }
    server.crash()
