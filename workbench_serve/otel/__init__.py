"""OpenTelemetry in and out: a run's requests as spans, and span exports as a run.

- ``spans``: spans made after the fact from a run's recorded timestamps
  (opentelemetry-sdk), so the timing numbers never include the SDK.
- ``otlp_json``: the OTLP/JSON ``ExportTraceServiceRequest`` line format of the
  OpenTelemetry Collector's file exporter (write and read).
- ``export``: where ``--otel`` sends them (OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT``
  is set, else a file).
- ``ingest``: OTLP/JSON files from any service -> a run (``workbench ingest-otel``).

Importing this package imports neither the SDK nor pandas.
"""

from __future__ import annotations

from workbench import lazy_exports

_EXPORTS = {
    "run_spans": "spans",
    "OtlpJsonFileExporter": "otlp_json",
    "read_otlp_json": "otlp_json",
    "export_run": "export",
    "ingest_spans": "ingest",
    "ingest_otel": "ingest",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(
    __name__, globals(), {k: f"{__name__}.{m}" for k, m in _EXPORTS.items()}
)
