"""Load-run tables in the run-record format (``workbench.record``).

``requests``: the profiler's columns, with ``start_ns`` = arrival and
``dur_ns`` = end to end (arrival to completion) and ``batch_size`` = items in
the batch the request rode in, plus ``arrival_ns``, ``batch_wait_ns``,
``queue_wait_ns``, ``service_ns`` and ``batch`` (-1: never dispatched). All
times int64 ns from the schedule's origin.

``stages``: per request, a ``batch_wait`` row (index 0, from arrival), a
``queue_wait`` row (index 1, from close) and one row per pipeline stage that
ran, carrying its batch's stage time (every request of a batch waits for the
whole batch). So ``budget()`` attributes end to end to waits and stages, and
``unattributed`` is the executor's bookkeeping around the pipeline call.
"""
from __future__ import annotations

import pandas as pd

from ..record import REQUEST_COLUMNS, STAGE_COLUMNS

LOAD_COLUMNS = ["arrival_ns", "batch_wait_ns", "queue_wait_ns", "service_ns", "batch"]
DRAIN_ERROR = ("batcher", "DrainTimeout")


def load_tables(batches, dropped, stage_names: list[str], origin_ns: int, stopped_ns: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Requests and stages tables from executed ``BatchRecord`` s and undispatched (request, arrival) pairs."""
    req_rows, stage_rows = [], []
    for rec in sorted(batches, key=lambda r: r.batch):
        t, f = rec.timing, rec.timing.failure
        size = len(rec.requests)
        for rid, arrival in zip(rec.requests, rec.arrivals_ns):
            req_rows.append((rid, False, arrival - origin_ns, rec.end_ns - arrival, f is None, f and f.stage,
                             f and f.error_type, f and f.message, size, arrival - origin_ns,
                             rec.close_ns - arrival, rec.start_ns - rec.close_ns, rec.end_ns - rec.start_ns, rec.batch))
            stage_rows.append((rid, "batch_wait", 0, arrival - origin_ns, rec.close_ns - arrival, None))
            stage_rows.append((rid, "queue_wait", 1, rec.close_ns - origin_ns, rec.start_ns - rec.close_ns, None))
            for k, (s, e) in enumerate(zip(t.stage_start_ns, t.stage_end_ns)):
                dev = t.device_ns[k] if t.device_ns is not None else None
                stage_rows.append((rid, stage_names[k], k + 2, s - origin_ns, e - s, dev))
    message = "not dispatched before the run's drain deadline (drain_timeout_s); the batcher was overloaded"
    for rid, arrival in dropped:
        req_rows.append((rid, False, arrival - origin_ns, stopped_ns - arrival, False, *DRAIN_ERROR, message, 0,
                         arrival - origin_ns, stopped_ns - arrival, 0, 0, -1))
    columns = list(REQUEST_COLUMNS) + LOAD_COLUMNS
    requests = pd.DataFrame(req_rows, columns=columns).sort_values("request", ignore_index=True)
    for col in ("request", "start_ns", "dur_ns", "batch_size", *LOAD_COLUMNS):
        requests[col] = requests[col].astype("int64")
    requests["ok"] = requests["ok"].astype(bool)
    requests["warmup"] = requests["warmup"].astype(bool)
    stages = pd.DataFrame(stage_rows, columns=list(STAGE_COLUMNS))
    stages["device_dur_ns"] = stages["device_dur_ns"].astype("Int64")
    return requests, stages
