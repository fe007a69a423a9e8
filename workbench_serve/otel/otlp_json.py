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
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from workbench.errors import TraceError, value_at
from workbench.files import read_capped

ID_KEYS = ("traceId", "spanId", "parentSpanId")
MAX_SPAN_FILE_BYTES = 2 * 2**30  # an OTLP/JSON export, read whole


def spans_to_otlp_json(spans: Sequence[Any]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` (OTLP/JSON dict) for SDK ``ReadableSpan`` s."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return message_to_otlp_json(encode_spans(spans))


def message_to_otlp_json(message) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` protobuf message as an OTLP/JSON dict (hex ids, integer enums)."""
    from google.protobuf.json_format import MessageToDict  # the [otel] extra's: reading needs none

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
    from opentelemetry.sdk.trace.export import SpanExporter

    return type("OtlpJsonFileSpanExporter", (OtlpJsonFileExporter, SpanExporter), {})(path)


# -- reading: OTLP/JSON decoded once into typed structures (msgspec); anything else is one TraceError line --

MAX_NS = 2**63 - 1
UnixNs = (
    Annotated[int, msgspec.Meta(ge=0, le=MAX_NS)]
    | Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,19}$")]
)
SpanId = Annotated[str, msgspec.Meta(max_length=64)]
StatusCode = (
    Annotated[int, msgspec.Meta(ge=0, le=2)]
    | Literal["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]
)
STATUS_ERROR = 2


class KeyValue(msgspec.Struct, frozen=True):
    key: str
    value: dict[str, Any] = {}


class Status(msgspec.Struct, frozen=True):
    code: StatusCode = 0
    message: str = ""


class SpanIn(msgspec.Struct, frozen=True):
    """One OTLP/JSON span as exported (only the fields the ingest reads are declared)."""

    traceId: SpanId
    spanId: SpanId
    startTimeUnixNano: UnixNs
    endTimeUnixNano: UnixNs
    name: str = ""
    parentSpanId: SpanId = ""
    status: Status = Status()


class ScopeSpans(msgspec.Struct, frozen=True):
    spans: list[SpanIn] = []


class Resource(msgspec.Struct, frozen=True):
    attributes: list[KeyValue] = []


class ResourceSpans(msgspec.Struct, frozen=True):
    resource: Resource = Resource()
    scopeSpans: list[ScopeSpans] = []
    instrumentationLibrarySpans: list[ScopeSpans] = []


class ExportRequest(msgspec.Struct, frozen=True):
    resourceSpans: list[ResourceSpans]


class Span(msgspec.Struct, frozen=True):
    """A span as the ingest uses it: ids, name, Unix ns times, the error message (None: not an error)."""

    trace: str
    span_id: str
    parent: str
    name: str
    start_ns: int
    end_ns: int
    error: str | None
    service: str | None


def read_otlp_json(path: str | Path) -> list[Span]:
    """The spans of an OTLP/JSON file (one ``ExportTraceServiceRequest`` per line, or one pretty-printed).

    Raises TraceError naming the file, the line and the field for anything that is not such an
    object: invalid UTF-8, a wrong type, a time past 2^63 - 1 ns, nesting past the decoder's depth.
    """
    p = Path(path)
    raw = read_capped(p, MAX_SPAN_FILE_BYTES, TraceError, "span file")
    return [span for line, obj in _documents(p, raw) for span in _spans(p, line, obj)]


def _documents(p: Path, raw: bytes) -> list[tuple[int, Any]]:
    """``(line, decoded JSON)`` per line, or ``[(1, object)]`` for a file holding one multi-line object."""
    lines = [(k + 1, line) for k, line in enumerate(raw.split(b"\n")) if line.strip()]
    try:
        return [(k, _decode_json(line, k)) for k, line in lines]
    except _NotJson as first:
        try:
            return [(1, _decode_json(raw))]
        except _NotJson:
            at = f"{p}:{first.line}" if len(lines) > 1 else str(p)
            raise TraceError(
                f"{at}: not OTLP/JSON (one ExportTraceServiceRequest per line): {first}"
            ) from None


class _NotJson(ValueError):
    """Why a document is not JSON, and the line it starts on."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def _decode_json(raw: bytes, line: int = 1) -> Any:
    try:
        return msgspec.json.decode(raw)
    except UnicodeDecodeError as exc:
        why = f"not UTF-8 text (byte {exc.start}); export OTLP/JSON as UTF-8"
    except RecursionError:
        why = "nested deeper than the decoder allows"
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        why = str(exc)
    raise _NotJson(why, line) from None


def _spans(p: Path, line: int, obj: Any) -> list[Span]:
    if not isinstance(obj, dict) or "resourceSpans" not in obj:
        raise TraceError(f"{p}:{line}: not an ExportTraceServiceRequest (no resourceSpans)")
    try:
        request = msgspec.convert(obj, ExportRequest, strict=True)
    except msgspec.ValidationError as exc:
        raise TraceError(f"{p}:{line}: {_field_error(exc, obj)}") from None
    out = []
    for resource in request.resourceSpans:
        service = attributes(resource.resource.attributes).get("service.name")
        service = service if isinstance(service, str) else None
        for scope in resource.scopeSpans or resource.instrumentationLibrarySpans:
            out += [_typed(s, service) for s in scope.spans]
    return out


def _typed(s: SpanIn, service: str | None) -> Span:
    code = s.status.code
    error = s.status.message if code in (STATUS_ERROR, "STATUS_CODE_ERROR") else None
    return Span(
        trace=s.traceId,
        span_id=s.spanId,
        parent=s.parentSpanId,
        name=s.name,
        start_ns=int(s.startTimeUnixNano),
        end_ns=int(s.endTimeUnixNano),
        error=error,
        service=service,
    )


def _field_error(exc: msgspec.ValidationError, obj: Any) -> str:
    """msgspec's "Expected `str`, got `int` - at `$.resourceSpans[0]...name`" as field, rule and value."""
    text = str(exc)
    what, _, path = text.partition(" - at `$")
    path = path.rstrip("`")
    value = value_at(obj, path)
    what = re.sub(r", got `[^`]*`$", "", what).replace("`", "").replace("Expected ", "must be ")
    return f"field {path.lstrip('.')!r} {what}, got {value!r:.80}"


def attributes(items: list[KeyValue]) -> dict[str, Any]:
    """OTLP ``KeyValue`` list -> plain dict (``{"key": k, "value": {"stringValue": v}}`` -> ``{k: v}``)."""
    return {item.key: next(iter(item.value.values()), None) for item in items}
