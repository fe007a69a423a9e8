"""The load generator: a wait for a pooled connection is lag (the client's), never server latency."""
import http.server
import threading
import time

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.serving.client import drive
from served_helpers import free_port


class Slow(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(0.05)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_pool_wait_counts_as_lag(slow_url):
    schedule = np.arange(6, dtype=np.int64) * 1_000_000  # 6 requests 1 ms apart, 2 connections, 50 ms each
    d = drive(slow_url, [b"x"], schedule, warmup=1, connections=2)
    waits = [r.pool_wait_ns for r in d.results]
    assert waits[:2] == [0, 0] and all(w > 30_000_000 for w in waits[2:])
    assert all(lag >= w for lag, w in zip(d.lags_ns.tolist(), waits))
    assert all(r.status == 200 and r.server_total_ns is None for r in d.results)  # no Server-Timing here
    assert [r.request_id for r in d.results] == [f"wb-{k}" for k in range(6)]


def test_unreachable_is_a_config_error_before_any_timing():
    with pytest.raises(ConfigError, match="cannot connect"):
        drive(f"http://127.0.0.1:{free_port()}", [b"x"], np.zeros(3, dtype=np.int64), warmup=1)
