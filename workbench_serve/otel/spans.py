"""A run's requests as OpenTelemetry spans, made after the fact from its recorded timestamps.

One trace per measured request: a root span (the request, end to end) and
one child span per stage row, with the stage's recorded start and duration.
Spans are created with opentelemetry-sdk's tracer, passing explicit start and
end times, *after* the run: the SDK's cost (measured and returned as
``sdk_ns_per_span``) never enters the run's numbers.

Wall-clock placement: a run records integer ns from its own origin on a
monotonic clock; the spans put that origin at the run's ``created`` time, so
their absolute times are approximate (to the run's start-up) while every
duration is the recorded one, exactly.

Attributes: ``workbench.request``, ``workbench.batch_size``,
``workbench.run_kind`` and, where the run has them, ``workbench.request_id``
and ``workbench.stage_index``; a failed request and its failing stage get
status ERROR with the exception type and message.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any
from .. import require

SCOPE = "workbench"


def origin_unix_ns(meta) -> int:
    """The run's origin as Unix ns (from ``created``; now if absent)."""
    created = meta.created
    if not created:
        return time.time_ns()
    return int(datetime.fromisoformat(created).timestamp() * 1_000_000) * 1_000


def run_spans(run, *, clock=time.perf_counter_ns) -> tuple[list[Any], dict[str, Any]]:
    """``(spans, facts)``: SDK ``ReadableSpan`` s of the run's measured requests, and
    ``facts = {requests, spans, sdk_ns_per_span}``."""
    require("opentelemetry.sdk.trace", "otel")
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": run.meta.pipeline or "workbench", "workbench.run_kind": run.kind}
        )
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer(SCOPE)
    requests = run.requests[~run.requests["warmup"].astype(bool)]
    by_request: dict[int, list] = {}
    for st in run.stages.sort_values(["request", "stage_index"]).itertuples(index=False):
        by_request.setdefault(int(st.request), []).append(st)
    work = [(row, by_request.get(int(row.request), [])) for row in requests.itertuples(index=False)]
    origin = origin_unix_ns(run.meta)
    t0 = clock()  # the SDK's own cost: span creation and the in-memory processor, nothing of pandas
    for row, rows in work:
        _request_spans(tracer, run, row, rows, origin)
    elapsed = clock() - t0
    spans = list(memory.get_finished_spans())
    provider.shutdown()
    return spans, {
        "requests": int(len(requests)),
        "spans": len(spans),
        "sdk_ns_per_span": int(elapsed / len(spans)) if spans else None,
    }


def _request_spans(tracer, run, row, stage_rows, origin: int) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    kind = trace.SpanKind.SERVER if run.kind == "served" else trace.SpanKind.INTERNAL
    start = origin + int(row.start_ns)
    attrs = {
        "workbench.request": int(row.request),
        "workbench.batch_size": int(row.batch_size),
        "workbench.run_kind": run.kind,
    }
    request_id = getattr(row, "request_id", None)
    if isinstance(request_id, str):
        attrs["workbench.request_id"] = request_id
    root = tracer.start_span(
        f"{run.meta.pipeline or 'pipeline'} request", kind=kind, start_time=start, attributes=attrs
    )
    context = trace.set_span_in_context(root)
    for st in stage_rows:
        s = origin + int(st.start_ns)
        child = tracer.start_span(
            st.stage,
            context=context,
            start_time=s,
            attributes={"workbench.stage_index": int(st.stage_index)},
        )
        if not row.ok and st.stage == row.error_stage:
            child.set_status(Status(StatusCode.ERROR, f"{row.error_type}: {row.error_message}"))
        child.end(end_time=s + int(st.dur_ns))
    if not row.ok:
        root.set_status(
            Status(StatusCode.ERROR, f"{row.error_stage}: {row.error_type}: {row.error_message}")
        )
    root.end(end_time=start + int(row.dur_ns))
