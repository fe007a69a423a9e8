"""OTLP/JSON files: one ``ExportTraceServiceRequest`` JSON object per line.

This is the OpenTelemetry Collector file exporter's format. The SDK has no
such exporter, so :class:`OtlpJsonFileExporter` encodes the SDK's spans with
the OTLP protobuf encoder the SDK's own OTLP exporters use and writes the
protobuf's JSON mapping with the OTLP/JSON rules: trace and span ids as hex
(not the protobuf default base64), enums as integers, 64-bit integers as
strings, lowerCamelCase keys.
"""
from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import TraceError

ID_KEYS = ("traceId", "spanId", "parentSpanId")


def spans_to_otlp_json(spans: Sequence[Any]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` (OTLP/JSON dict) for SDK ``ReadableSpan`` s."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return message_to_otlp_json(encode_spans(spans))


def message_to_otlp_json(message) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` protobuf message as an OTLP/JSON dict (hex ids, integer enums)."""
    from google.protobuf.json_format import MessageToDict

    message = MessageToDict(message, use_integers_for_enums=True)
    for resource in message.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return message


def _hex_ids(obj: dict[str, Any]) -> None:
    for key in ID_KEYS:
        if obj.get(key):
            obj[key] = base64.b64decode(obj[key]).hex()


def _sdk_base():
    from opentelemetry.sdk.trace.export import SpanExporter

    return SpanExporter


class OtlpJsonFileExporter:
    """A SpanExporter appending one OTLP/JSON line per export call to ``path``.

    Built by :func:`file_exporter` (the SDK base class is imported lazily).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.lines = 0

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        if not spans:
            return SpanExportResult.SUCCESS
        line = json.dumps(spans_to_otlp_json(spans), separators=(",", ":"))
        with self._lock, self.path.open("a") as fh:
            fh.write(line + "\n")
            self.lines += 1
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def file_exporter(path: str | Path):
    """An ``OtlpJsonFileExporter`` that is also an SDK ``SpanExporter``."""
    cls = type("OtlpJsonFileSpanExporter", (OtlpJsonFileExporter, _sdk_base()), {})
    return cls(path)


def read_otlp_json(path: str | Path) -> Iterator[dict[str, Any]]:
    """The span dicts of an OTLP/JSON file, each with ``resource`` (attribute dict) added.

    One ``ExportTraceServiceRequest`` per line (a file holding one pretty-printed
    object works too). A line that is not such an object raises TraceError
    naming the file and line.
    """
    p = Path(path)
    text = p.read_text()
    try:
        objects = [(k + 1, json.loads(line)) for k, line in enumerate(text.splitlines()) if line.strip()]
    except ValueError:
        try:
            objects = [(1, json.loads(text))]
        except ValueError as exc:
            raise TraceError(f"{p}: not OTLP/JSON (one ExportTraceServiceRequest per line): {exc}") from None
    for line, obj in objects:
        if not isinstance(obj, dict) or "resourceSpans" not in obj:
            raise TraceError(f"{p}:{line}: not an ExportTraceServiceRequest (no resourceSpans)")
        for resource in obj["resourceSpans"] or []:
            attrs = attributes((resource.get("resource") or {}).get("attributes"))
            for scope in resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans") or []:
                for span in scope.get("spans") or []:
                    yield dict(span, resource=attrs)


def attributes(items: list[dict] | None) -> dict[str, Any]:
    """OTLP ``KeyValue`` list -> plain dict (``{"key": k, "value": {"stringValue": v}}`` -> ``{k: v}``)."""
    out = {}
    for item in items or []:
        value = item.get("value") or {}
        out[item.get("key")] = next(iter(value.values()), None) if value else None
    return out
