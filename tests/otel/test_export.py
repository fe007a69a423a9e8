"""--otel: spans made from a run's timestamps, to an OTLP/JSON file or through the SDK's OTLP exporter
to a collector, and ingest-otel reading either back to the same numbers."""

import http.server
import json
import threading

import pandas as pd
import pytest

from workbench_serve.otel.export import SPANS_FILE, export_run
from workbench_serve.otel.ingest import ingest_otel
from workbench_serve.otel.otlp_json import message_to_otlp_json
from workbench_serve.otel.spans import run_spans
from workbench.record import Run

MS = 1_000_000


def synthetic_run():
    requests = pd.DataFrame(
        {
            "request": [0, 1, 2],
            "warmup": [True, False, False],
            "start_ns": [0, 10 * MS, 20 * MS],
            "dur_ns": [9 * MS, 3_000_123, 4 * MS],
            "ok": [True, True, False],
            "error_stage": [None, None, "forward"],
            "error_type": [None, None, "ValueError"],
            "error_message": [None, None, "boom"],
            "batch_size": [1, 1, 1],
        }
    )
    stages = pd.DataFrame(
        {
            "request": [0, 1, 1, 2, 2],
            "stage": ["parse", "parse", "forward", "parse", "forward"],
            "stage_index": [0, 0, 1, 0, 1],
            "start_ns": [0, 10 * MS, 11 * MS, 20 * MS, 21 * MS],
            "dur_ns": [MS, MS, 1_500_077, MS, 2 * MS],
            "device_dur_ns": pd.array([None] * 5, dtype="Int64"),
        }
    )
    meta = {
        "kind": "profile",
        "pipeline": "synthetic",
        "stages": ["parse", "forward"],
        "config": {},
        "env": {},
        "created": "2026-01-01T00:00:00+00:00",
        "timing": {},
    }
    return Run(meta=meta, requests=requests, stages=stages)


def check_round_trip(run):
    assert run.kind == "ingested" and run.meta.pipeline == "synthetic"
    assert run.stage_names == ["parse", "forward"]
    assert run.requests["dur_ns"].tolist() == [3_000_123, 4 * MS]  # warm-up left out
    assert run.requests["start_ns"].tolist() == [0, 10 * MS]
    first = run.stages[run.stages["request"] == 0].set_index("stage")["dur_ns"].to_dict()
    assert first == {"parse": MS, "forward": 1_500_077}
    bad = run.requests.iloc[1]
    assert (bad["ok"], bad["error_stage"], bad["error_type"], bad["error_message"]) == (
        False,
        "forward",
        "ValueError",
        "boom",
    )


def test_spans_are_made_after_the_fact_with_the_recorded_times():
    spans, facts = run_spans(synthetic_run())
    assert facts["requests"] == 2 and facts["spans"] == 6 and facts["sdk_ns_per_span"] > 0
    by_name = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    roots = by_name["synthetic request"]
    assert sorted(r.end_time - r.start_time for r in roots) == [3_000_123, 4 * MS]
    assert sorted(s.end_time - s.start_time for s in by_name["forward"]) == [1_500_077, 2 * MS]
    assert all(
        s.parent.span_id == r.context.span_id
        for r in roots
        for s in spans
        if s.context.trace_id == r.context.trace_id and s is not r
    )


def test_file_export_is_otlp_json_and_ingests_to_the_same_numbers(tmp_path, monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    line = export_run(synthetic_run(), tmp_path)
    assert line.startswith(f"otel: 6 spans of 2 requests to {tmp_path / SPANS_FILE}")
    obj = json.loads((tmp_path / SPANS_FILE).read_text().splitlines()[0])
    span = obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and int(span["traceId"], 16) and len(span["spanId"]) == 16
    assert isinstance(span["kind"], int) and isinstance(span["startTimeUnixNano"], str)
    check_round_trip(ingest_otel(tmp_path / SPANS_FILE))


class Collector(http.server.BaseHTTPRequestHandler):
    """A minimal OTLP/HTTP collector: decodes the protobuf the SDK sends, appends OTLP/JSON lines."""

    out = None

    def do_POST(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        body = self.rfile.read(int(self.headers["Content-Length"]))
        message = ExportTraceServiceRequest.FromString(body)
        with open(self.out, "a") as fh:
            fh.write(json.dumps(message_to_otlp_json(message)) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def collector(tmp_path):
    Collector.out = tmp_path / "collected.jsonl"
    server = http.server.HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", Collector.out
    server.shutdown()
    server.server_close()


def test_otlp_endpoint_gets_the_sdk_exporter_output(collector, tmp_path, monkeypatch):
    url, received = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    line = export_run(synthetic_run(), tmp_path)
    assert f"to OTLP/HTTP at {url}" in line and not (tmp_path / SPANS_FILE).exists()
    check_round_trip(ingest_otel(received))
