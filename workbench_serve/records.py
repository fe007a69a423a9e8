"""Run tables of a served run, server side and client side (``workbench.record`` format).

Server side (``workbench serve``): one request row per HTTP request, with the
load-run columns (``arrival_ns`` = queued, ``batch_wait_ns``,
``queue_wait_ns``, ``service_ns``, ``batch``) plus ``request_id`` (the
client's ``X-Request-Id``, or null); ``start_ns`` is when the handler started
and ``dur_ns`` the server end to end. Stage rows: ``ingress``, ``batch_wait``,
``queue_wait``, the pipeline's stages, ``handoff``, ``egress``.

Client side (``workbench load --url``): ``start_ns`` is when the request was
due, ``dur_ns`` the client end to end timed from it (due to response body read,
the generator's lag inside, as in wrk2), ``lag_ns`` the send minus the due time
(``arrival_ns`` is the send); the stage rows are the server's, taken
from each response's ``Server-Timing``, plus ``network`` = client end to end
minus the server's ``total``. The client cannot read the server's clock, so
joined stage rows are laid end to end from the send time (``network``
first); their durations are measured, their start times are not.
All times int64 ns from the run's origin.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pandas as pd

from workbench.batching.policy import wait_split
from workbench.batching.summary import LOAD_COLUMNS
from workbench.record import build_tables, request_row
from workbench.record.tables import build_units
from workbench.timing import StageFailure
from .protocol import TOTAL
from .service import AFTER, BEFORE, VALIDATE, BatchDone

SERVED_COLUMNS = {**LOAD_COLUMNS, "request_id": "object", "cache_hit": "float64"}
NETWORK = "network"
RESERVED = (
    NETWORK,
    TOTAL,
)  # the client's own stage and the server's end to end: never a server stage
MAX_STAGE_NAME = 200  # characters of a server stage's name
DISCONNECTED = (
    "egress",
    "ClientDisconnected",
    "the client closed the connection before the response was sent",
)
UNANSWERED = ("egress", "ServerStopped", "the server stopped before this response was sent")
DROPPED = (
    "batcher",
    "DrainTimeout",
    "not dispatched before the server's drain deadline at shutdown",
)


def server_tables(service, dropped, stopped_ns: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Requests and stages of a ``PipelineService`` after ``stop()`` (``dropped``: its return value)."""
    origin, names = service.origin_ns, service.pipe.stage_names
    order = [*BEFORE, *names, *AFTER]
    req_rows, stage_rows = [], []
    for rec in map(BatchDone._make, service.batch_log):
        for k, rid in enumerate(rec.requests):
            t = service.times(rid)
            error = rec.failure if rec.item_failures is None else rec.item_failures[k]
            if error is None and t.disconnected:
                error = DISCONNECTED
            elif error is None and t.sent_ns is None:
                error = UNANSWERED
            dur = (t.sent_ns if t.sent_ns is not None else stopped_ns) - t.received_ns
            waits = wait_split(t.submitted_ns, rec.due_ns, rec.close_ns, rec.start_ns)
            load = (t.submitted_ns - origin, *waits, rec.end_ns - rec.start_ns, rec.batch)
            row = _row(
                rid, t.received_ns - origin, dur, error, len(rec.requests), t.request_id, load
            )
            req_rows.append(row | {"cache_hit": service.batch_cache_hit.get(rec.batch)})
            if t.resumed_ns is None:
                continue
            cursor = t.received_ns
            for name, dur in service.stage_times(rec, t):
                stage_rows.append((rid, name, order.index(name), cursor - origin, dur, None))
                cursor += dur
    for rid, arrival in dropped:
        t = service.times(rid)
        load = (t.submitted_ns - origin, stopped_ns - arrival, 0, 0, -1)
        dur = stopped_ns - t.received_ns
        req_rows.append(_row(rid, t.received_ns - origin, dur, DROPPED, 0, t.request_id, load))
    # refused requests never had a batcher id: numbered after the queued ones
    first = service.received
    for k, (received, answered, request_id, kind, message) in enumerate(service.rejected):
        error, load = (VALIDATE, kind, message), (received - origin, 0, 0, 0, -1)
        req_rows.append(
            _row(first + k, received - origin, answered - received, error, 0, request_id, load)
        )
    return build_tables(req_rows, stage_rows, SERVED_COLUMNS)


def _row(rid, start, dur, error, size, request_id, load: tuple) -> dict:
    """One requests-table row (``error``: ``(stage, type, message[, where])`` or None; ``load``: the
    :data:`LOAD_COLUMNS` values; columns other modules add are filled by ``typed_table``)."""
    failure = StageFailure(*error) if error else None
    row = request_row(rid, False, start, dur, failure, size) | dict(zip(LOAD_COLUMNS, load))
    return row | {"request_id": request_id}


def server_stage_names(results: list, listed: list[str] | None) -> list[str]:
    """The run's server stages: the server's own list (``/healthz``), else every name the responses
    reported, in the order first seen; never a :data:`RESERVED` or overlong name."""
    names = listed or [name for r in results for name, _ in r.server_stages]
    return [n for n in dict.fromkeys(names) if n not in RESERVED and len(n) <= MAX_STAGE_NAME]


def fitted_to_client(results: list, names: list[str]) -> tuple[list, list[str]]:
    """Each result's ``Server-Timing`` fitted to what the client measured, and a note per kind of misfit.

    The server's times are its claims: a ``total`` past the client's end to end (a server rounding
    to whole ms) is cut to it (``network`` 0, never negative); a stage that is not in ``names``
    (reserved, unlisted, repeated) is left out; stages adding up past ``total`` are cut where the sum
    reaches it. What is left out stays inside ``total`` as unattributed time.
    """
    counts: Counter = Counter()
    fitted = []
    for r in results:
        if r.server_total_ns is None:
            fitted.append(r)
            continue
        total = min(r.server_total_ns, r.done_ns - r.sent_ns)
        misfits: dict[str, None] = {}  # an ordered set: the notes in a fixed order
        if total < r.server_total_ns:
            misfits["a Server-Timing total past the client's end to end (cut to it, network 0)"] = (
                None
            )
        kept, seen, cursor = [], set(), 0
        for name, dur in r.server_stages:
            if name not in names or name in seen:
                misfits[f"a stage {name[:40]!r} that is not one of the server's (unattributed)"] = (
                    None
                )
                continue
            seen.add(name)
            if cursor + dur > total:
                misfits["stages adding up past the Server-Timing total (cut at it)"] = None
                dur = total - cursor
            kept.append((name, dur))
            cursor += dur
        counts.update(list(misfits))
        fitted.append(dataclasses.replace(r, server_stages=kept, server_total_ns=total))
    notes = [f"{n} of {len(results)} responses had {what}" for what, n in counts.items()]
    return fitted, notes


def client_tables(results: list, origin_ns: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Requests and stages from the load generator's ``Result`` s, joined with their ``Server-Timing``."""
    req_rows, stage_rows = [], []
    for k, r in enumerate(results):
        e2e, start = r.done_ns - r.sent_ns, r.sent_ns - origin_ns
        lag = max(0, r.sent_ns - r.due_ns)
        waits = dict(r.server_stages)
        service = sum(d for n, d in r.server_stages if n not in (*BEFORE, *AFTER))
        load = (start, waits.get("batch_wait", 0), waits.get("queue_wait", 0), service, r.batch)
        row = _row(k, start - lag, e2e + lag, r.error, r.batch_size, r.request_id, load)
        req_rows.append(row | {"cache_hit": r.cache_hit, "lag_ns": lag})
        if r.server_total_ns is None:
            continue
        cursor = start
        for index, (name, dur) in enumerate([(NETWORK, e2e - r.server_total_ns), *r.server_stages]):
            stage_rows.append((k, name, index, cursor, dur, None))
            cursor += dur
    return build_tables(req_rows, stage_rows, {**SERVED_COLUMNS, "lag_ns": "int64"})


STREAM = "stream"  # the units' stage when the server did not name its streaming stage


def client_units(results: list, origin_ns: int, stage: str | None) -> pd.DataFrame | None:
    """The ``units`` table of a load run (:mod:`workbench.record.tables`): each unit of each request's
    event stream as received (ns from the run's origin, as ``start_ns``), also those of a request whose
    stream was cut (it failed; its units stay here). ``stage``: the server's streaming stage (its
    ``/healthz``), else :data:`STREAM`. None when no response streamed."""
    if not any(r.unit_ns for r in results):
        return None
    name = stage or STREAM
    return build_units(
        (k, name, i, at - origin_ns)
        for k, r in enumerate(results)
        for i, at in enumerate(r.unit_ns)
    )


def stream_counts(results: list) -> dict[str, int]:
    """``serving.streams`` of a load run: requests that streamed and their units, and how many of them
    failed after a first unit (a stream cut, or a stage that raised after it) with how many units."""
    streamed = [r for r in results if r.unit_ns]
    failed = [r for r in streamed if r.error is not None]
    return {
        "requests": len(streamed),
        "units": sum(len(r.unit_ns) for r in streamed),
        "failed_requests": len(failed),
        "failed_units": sum(len(r.unit_ns) for r in failed),
    }
