"""``--otel``: send a run's spans to a collector over OTLP, or to an OTLP/JSON file.

``OTEL_EXPORTER_OTLP_ENDPOINT`` set (the standard variable; the SDK's
OTLP/HTTP exporter reads it and its companions, e.g. ``..._HEADERS``):
export over OTLP/HTTP. Otherwise write ``otel-spans.jsonl`` (one
``ExportTraceServiceRequest`` per line) into the run folder.
"""
from __future__ import annotations

import os
from pathlib import Path

SPANS_FILE = "otel-spans.jsonl"
CHUNK = 512  # spans per ExportTraceServiceRequest (per line)


def export_run(run, run_dir: str | Path | None = None) -> str:
    """Export the run's spans; returns one line saying where, how many, and the SDK's cost per span."""
    from ..errors import WorkbenchError
    from .spans import run_spans

    spans, facts = run_spans(run)
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter, where = OTLPSpanExporter(), f"OTLP/HTTP at {endpoint}"
    else:
        from .otlp_json import file_exporter

        folder = Path(run_dir or run.path or ".")
        exporter, where = file_exporter(folder / SPANS_FILE), str(folder / SPANS_FILE)
    for k in range(0, len(spans), CHUNK):
        result = exporter.export(spans[k:k + CHUNK])
        if result.name != "SUCCESS":
            raise WorkbenchError(f"--otel: exporting spans to {where} failed ({result.name}); is the collector up?")
    exporter.shutdown()
    cost = facts["sdk_ns_per_span"]
    return (f"otel: {facts['spans']} spans of {facts['requests']} requests to {where} "
            f"(made after the run from its timestamps: {cost / 1000 if cost else 0:.1f} us per span, not in its numbers)")


def otel_hook(args, run, run_dir) -> None:
    """``--otel`` of a command: export after the run is saved; the line goes to stderr under ``--json``."""
    import sys

    if getattr(args, "otel", False):
        print(export_run(run, run_dir), file=sys.stderr if getattr(args, "json", False) else sys.stdout, flush=True)
