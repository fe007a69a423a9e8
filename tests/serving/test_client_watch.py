"""The HTTP load generator stopped by a sweep point's stability watch, against a real local server."""

import http.server
import threading
import time

import numpy as np
import pytest

from workbench.analysis.windows import StabilityWatch
from workbench.batching.arrivals import Arrivals
from workbench_serve.client import drive
from workbench_serve.loadrun import run_http_load

MS = 1_000_000
WINDOW_MS = 200
PER_WINDOW = 20


class Handler(http.server.BaseHTTPRequestHandler):
    """``POST /predict``: 200 after ``server.delay_ms(k)`` for request id ``...-k`` (0 for the warm-up)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        rid = self.headers.get("X-Request-Id")
        if rid is not None:
            time.sleep(self.server.delay_ms(int(rid.rpartition("-")[2])) / 1000)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads, srv.block_on_close, srv.delay_ms = True, False, lambda k: 0.0
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def spaced_ns(windows: int) -> np.ndarray:
    """20 sends 7.5 ms apart at the start of each 200 ms window, then 57.5 ms of quiet before the next."""
    return np.array(
        [w * WINDOW_MS * MS + k * 7_500_000 for w in range(windows) for k in range(PER_WINDOW)],
        dtype=np.int64,
    )


def test_a_stable_server_is_left_after_three_windows(server):
    watch = StabilityWatch(WINDOW_MS * MS, 10_000.0, 6)  # any three windows with answers agree
    d = drive(server.url, [b"{}"], spaced_ns(6), tag="t", warmup=1, watch=watch)
    assert (watch.windows_run, watch.stable_after) == (3, 3)
    assert len(d.results) == 3 * PER_WINDOW and len(d.lags_ns) == 3 * PER_WINDOW
    assert [r.status for r in d.results] == [200] * 60 and not d.interrupted
    assert d.results[-1].request_id == "t-59"


def test_a_server_slowing_down_gets_every_window(server):
    server.delay_ms = lambda k: k // PER_WINDOW  # window w: w ms, never within 10 %
    watch = StabilityWatch(WINDOW_MS * MS, 10.0, 6)
    d = drive(server.url, [b"{}"], spaced_ns(6), warmup=1, watch=watch)
    assert (watch.windows_run, watch.stable_after) == (None, None)
    assert len(d.results) == 6 * PER_WINDOW and all(r.status == 200 for r in d.results)


def test_a_served_load_run_stopped_by_the_watch_records_what_was_sent(server, tmp_path):
    path = tmp_path / "arrivals.csv"
    path.write_text("arrival_ns\n" + "\n".join(map(str, spaced_ns(6).tolist())) + "\n")
    watch = StabilityWatch(WINDOW_MS * MS, 10_000.0, 6)
    run = run_http_load(
        server.url, [b"{}"], Arrivals("replay", path=str(path)), warmup=1, watch=watch
    )
    assert watch.windows_run == 3 and len(run.requests) == 60 and run.meta.status == "complete"
    assert run.meta.timing.requests == 60 and run.requests["ok"].all()
