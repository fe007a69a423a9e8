"""``--otel``: send a run's spans to a collector over OTLP, or to an OTLP/JSON file.

``OTEL_EXPORTER_OTLP_ENDPOINT`` set (the standard variable; the SDK's
OTLP/HTTP exporter reads it and its companions, e.g. ``..._HEADERS``):
export over OTLP/HTTP. Otherwise write ``otel-spans.jsonl`` (one
``ExportTraceServiceRequest`` per line) into the run folder.

A collector that cannot be reached or refuses the spans never costs the
measurement: the export has a deadline (``OTEL_EXPORTER_OTLP_TIMEOUT`` /
``..._TRACES_TIMEOUT`` when set, else :data:`EXPORT_TIMEOUT_S` for all the
spans together), the spans then go to ``otel-spans.jsonl`` in the run folder
instead (all of them: a collector that took some has those twice, which its
span ids make plain), and the line printed says so. The command's exit code
stays the measurement's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from .spans import run_spans
import logging
from .otlp_json import file_exporter
import sys

SPANS_FILE = "otel-spans.jsonl"
CHUNK = 512  # spans per ExportTraceServiceRequest (per line)
# the whole OTLP export, retries included, unless the OTel timeout variables say otherwise
EXPORT_TIMEOUT_S = 3.0
TIMEOUT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")


def export_run(run, run_dir: str | Path | None = None, *, timeout_s: float | None = None) -> str:
    """Export the run's spans; returns one line saying where, how many, and the SDK's cost per span.

    timeout_s: the deadline of an OTLP export (default: the OTel variables, else :data:`EXPORT_TIMEOUT_S`).
    """
    spans, facts = run_spans(run)
    folder = Path(run_dir or run.path or ".")
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    cost = facts["sdk_ns_per_span"]
    made = (
        f"made after the run from its timestamps: {cost / 1000 if cost else 0:.1f} us per span, "
        "not in its numbers"
    )
    what, file = f"{facts['spans']} spans of {facts['requests']} requests", folder / SPANS_FILE
    if endpoint:
        problem = _send_otlp(spans, timeout_s)
        if problem is None:
            return f"otel: {what} to OTLP/HTTP at {endpoint} ({made})"
        _write_file(spans, file)
        return (
            f"otel: the collector at {endpoint} did not take the spans ({problem}); {what} "
            f"written to {file} instead ({made})"
        )
    _write_file(spans, file)
    return f"otel: {what} to {file} ({made})"


def _send_otlp(spans: list, timeout_s: float | None) -> str | None:
    """Send ``spans`` with the SDK's OTLP/HTTP exporter within the deadline; None, or why it did not work."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if timeout_s is None and not any(os.environ.get(v) for v in TIMEOUT_VARS):
        timeout_s = EXPORT_TIMEOUT_S
    deadline = time.monotonic() + (timeout_s or 0)
    sdk_log = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
    level = sdk_log.level
    sdk_log.setLevel(logging.CRITICAL)  # its retry warnings: the line returned says what happened
    try:
        for k in range(0, len(spans), CHUNK):
            left = deadline - time.monotonic() if timeout_s else None
            if left is not None and left <= 0:
                return f"no answer within {timeout_s:g} s"
            exporter = OTLPSpanExporter(timeout=left)
            try:
                result = exporter.export(spans[k : k + CHUNK])
            finally:
                exporter.shutdown()
            if result.name != "SUCCESS":
                late = timeout_s is not None and time.monotonic() >= deadline
                return f"no answer within {timeout_s:g} s" if late else f"export {result.name}"
    except Exception as exc:  # the SDK raising (e.g. a malformed endpoint) must not cost the run
        return f"{type(exc).__name__}: {exc}"
    finally:
        sdk_log.setLevel(level)
    return None


def _write_file(spans: list, path: Path) -> None:
    exporter = file_exporter(path)
    for k in range(0, len(spans), CHUNK):
        exporter.export(spans[k : k + CHUNK])
    exporter.shutdown()


def otel_hook(args, run, run_dir) -> None:
    """``--otel`` of a command: export after the run is saved; the line goes to stderr under ``--json``."""
    if getattr(args, "otel", False):
        print(
            export_run(run, run_dir),
            file=sys.stderr if getattr(args, "json", False) else sys.stdout,
            flush=True,
        )
