"""--otel with the collector down or silent: a bounded export, the spans in the run folder instead, and the
command's exit code that of the measurement (loopback only)."""

import socket
import threading
import time
import urllib.request

import pandas as pd

from workbench_serve.otel.export import SPANS_FILE, export_run
from workbench_serve.otel.ingest import ingest_otel
from workbench.record import Run

MS = 1_000_000


def small_run():
    requests = pd.DataFrame(
        {
            "request": [0, 1],
            "warmup": [False, False],
            "start_ns": [0, 10 * MS],
            "dur_ns": [3 * MS, 4 * MS],
            "ok": [True, True],
            "error_stage": [None, None],
            "error_type": [None, None],
            "error_message": [None, None],
            "batch_size": [1, 1],
        }
    )
    stages = pd.DataFrame(
        {
            "request": [0, 1],
            "stage": ["forward", "forward"],
            "stage_index": [0, 0],
            "start_ns": [0, 10 * MS],
            "dur_ns": [2 * MS, 3 * MS],
            "device_dur_ns": pd.array([None] * 2, dtype="Int64"),
        }
    )
    meta = {
        "kind": "profile",
        "pipeline": "small",
        "stages": ["forward"],
        "config": {},
        "env": {},
        "created": "2026-01-01T00:00:00+00:00",
        "timing": {},
    }
    return Run(meta=meta, requests=requests, stages=stages)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_collector_gets_a_file_instead(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    started = time.monotonic()
    line = export_run(small_run(), tmp_path, timeout_s=2.0)
    assert time.monotonic() - started < 4
    assert (
        "did not take the spans" in line and f"written to {tmp_path / SPANS_FILE} instead" in line
    )
    assert ingest_otel(tmp_path / SPANS_FILE).requests["dur_ns"].tolist() == [3 * MS, 4 * MS]


def test_a_silent_collector_is_bounded_by_the_deadline(tmp_path, monkeypatch):
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    held = []
    threading.Thread(target=lambda: held.append(silent.accept()), daemon=True).start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
    started = time.monotonic()
    line = export_run(small_run(), tmp_path, timeout_s=1.0)
    assert time.monotonic() - started < 3
    assert "no answer within 1 s" in line and (tmp_path / SPANS_FILE).exists()
    silent.close()


def test_serve_with_otel_and_the_collector_down_keeps_its_exit_code_and_its_spans(tmp_path):
    from served_helpers import ENV, PIPELINE
    from workbench_serve.process import ServeProcess

    out = tmp_path / "served"
    env = dict(ENV, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{closed_port()}")
    server = ServeProcess(
        ["--pipeline", PIPELINE, "--port", "0", "--warmup", "1", "--otel", "--out", str(out)],
        env=env,
    )
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"{server.url}/predict", data=b'{"x": 1}', method="POST"),
            timeout=30,
        ) as r:
            assert r.status == 200
        started = time.monotonic()
        code, stdout, stderr = server.stop()
        assert time.monotonic() - started < 10  # was 12-13 s of retries
    finally:
        server.kill()
    assert code == 0, stderr  # the measurement's verdict (no failed request), not 2
    assert "did not take the spans" in stdout and (out / SPANS_FILE).exists()
    assert len(ingest_otel(out / SPANS_FILE).requests) == 1
