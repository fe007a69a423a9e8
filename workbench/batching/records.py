"""Load-run tables in the run-record format (``workbench.record``), times int64 ns from the origin.

``requests``: the profiler's columns (``start_ns`` when the request was due, ``dur_ns`` from then to
completion) plus ``arrival_ns`` (when it was submitted), ``lag_ns``, ``batch_wait_ns``,
``queue_wait_ns``, ``service_ns`` and ``batch`` (-1: never dispatched). ``stages``: per request a
``batch_wait`` and a ``queue_wait`` row, then one per pipeline stage that ran (its batch's time),
so ``budget()`` attributes end to end to waits and stages.
"""

from __future__ import annotations

import platform
import sys

import numpy as np
import pandas as pd

from ..record import (
    REQUEST_COLUMNS,
    STAGE_COLUMNS,
    Config,
    Env,
    Run,
    SimulationMeta,
    Simulation,
    Timing,
    build_tables,
    request_row,
    stage_rows,
    typed_table,
)
from ..record.meta import META_CLASSES
from ..record.tables import LOAD_REQUEST_COLUMNS as LOAD_COLUMNS
from ..timing import StageFailure
from .policy import wait_split

# the failures of a request never dispatched
_DRAINED = StageFailure(
    "batcher",
    "DrainTimeout",
    "not dispatched before the run's drain deadline (drain_timeout_s); the batcher was overloaded",
)
_STOPPED = StageFailure(
    "batcher",
    "RunStopped",
    "not dispatched: the run stopped when a batch ran past the per-request timeout (timeout_s)",
)


def load_tables(
    batches,
    dropped,
    stage_names: list[str],
    origin_ns: int,
    stopped_ns: int,
    stopped_by: str | None = None,
    schedule_ns: np.ndarray | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Requests and stages tables from executed ``BatchRecord`` s and undispatched ``(request,
    arrival)`` pairs (``DrainTimeout``, or ``RunStopped`` after a timeout); ``schedule_ns[rid]``:
    when request ``rid`` was due, ns from ``origin_ns`` (None: when it arrived)."""
    undispatched = _STOPPED if stopped_by == "timeout" else _DRAINED

    def lag(rid: int, arrival: int) -> int:
        return 0 if schedule_ns is None else max(0, arrival - origin_ns - int(schedule_ns[rid]))

    req_rows, st_rows = [], []
    for rec in sorted(batches, key=lambda r: r.batch):
        size = len(rec.requests)
        for rid, arrival in zip(rec.requests, rec.arrivals_ns):
            late = lag(rid, arrival)
            start, dur = arrival - late - origin_ns, rec.end_ns - arrival + late
            row = request_row(rid, False, start, dur, rec.timing.failure, size)
            batch_wait, queue_wait = wait_split(arrival, rec.due_ns, rec.close_ns, rec.start_ns)
            service = rec.end_ns - rec.start_ns
            load = _load_columns(arrival - origin_ns, batch_wait, queue_wait, service, rec.batch)
            req_rows.append(row | load | {"lag_ns": late})
            st_rows.append((rid, "batch_wait", 0, arrival - origin_ns, batch_wait, None))
            st_rows.append(
                (rid, "queue_wait", 1, arrival + batch_wait - origin_ns, queue_wait, None)
            )
            st_rows += stage_rows(rid, rec.timing, stage_names, origin_ns, first_index=2)
    for rid, arrival in dropped:
        late = lag(rid, arrival)
        start, dur = arrival - late - origin_ns, stopped_ns - arrival + late
        row = request_row(rid, False, start, dur, undispatched, 0)
        load = _load_columns(arrival - origin_ns, stopped_ns - arrival, 0, 0, -1)
        req_rows.append(row | load | {"lag_ns": late})
    return build_tables(req_rows, st_rows, {**LOAD_COLUMNS, "lag_ns": "int64"})


def _load_columns(arrival_ns, batch_wait_ns, queue_wait_ns, service_ns, batch) -> dict:
    """One request's :data:`LOAD_COLUMNS` (ns from the schedule's origin; batch -1: never dispatched)."""
    return dict(zip(LOAD_COLUMNS, (arrival_ns, batch_wait_ns, queue_wait_ns, service_ns, batch)))


SIMULATION_STAGES = ["batch_wait", "queue_wait", "service"]


def simulation_tables(requests: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run-record tables of a simulation's requests: each succeeds, its stages ``batch_wait``,
    ``queue_wait`` and ``service`` back to back (nothing unattributed)."""
    names = ("request", "dur_ns", "batch_size", *LOAD_COLUMNS)
    col = {c: requests[c].to_numpy(dtype="int64") for c in names}
    req = pd.DataFrame(
        {
            "request": col["request"],
            "warmup": False,
            "start_ns": col["arrival_ns"],
            "dur_ns": col["dur_ns"],
            "ok": True,
            "batch_size": col["batch_size"],
            **{c: col[c] for c in LOAD_COLUMNS},
        }
    )
    durs = np.stack([col["batch_wait_ns"], col["queue_wait_ns"], col["service_ns"]], axis=1)
    starts = col["arrival_ns"][:, None] + np.cumsum(durs, axis=1) - durs
    k = len(SIMULATION_STAGES)
    stages = pd.DataFrame(
        {
            "request": np.repeat(col["request"], k),
            "stage": np.tile(np.array(SIMULATION_STAGES, dtype=object), len(req)),
            "stage_index": np.tile(np.arange(k), len(req)),
            "start_ns": starts.ravel(),
            "dur_ns": durs.ravel(),
            "device_dur_ns": pd.array([None] * durs.size, dtype="Int64"),
        }
    )
    return typed_table(req, {**REQUEST_COLUMNS, **LOAD_COLUMNS}), typed_table(stages, STAGE_COLUMNS)


def simulation_run(sim, pipeline: str | None, sources: list[str], created: str):
    """A ``Simulation`` as a run record; ``sources``: the service run folders."""
    requests, stages = simulation_tables(sim.requests)
    rate = sim.rate_rps if np.isfinite(sim.rate_rps) else None
    capacity = sim.capacity_rps if np.isfinite(sim.capacity_rps) else None
    meta = SimulationMeta(
        pipeline=pipeline,
        description="dynamic batching simulated from profiled service times",
        stages=list(SIMULATION_STAGES),
        config=Config(batch_size=sim.policy.max_batch_size),
        env=Env(python=sys.version.split()[0], platform=platform.platform()),
        created=created,
        timing=Timing(warmup=0, requests=len(requests), clock="simulated"),
        simulation=Simulation.from_dict(
            {
                **sim.meta,
                "policy": sim.policy.params(),
                "capacity_rps": capacity,
                "rate_rps": rate,
                "stable": bool(sim.stable),
                "service_runs": list(sources),
            }
        ),
    )
    return Run(meta=meta, requests=requests, stages=stages)


def pipeline_run_meta(
    pipe, kind: str, stages: list, started, n_requests: int, env: dict, **sections
):
    """run.json of a run whose executor threads called ``pipe`` (a load run, a served run): the
    profiler's fields, ``stages`` (the pipeline's with the waits around them), no trace."""
    cuda = pipe.config.is_cuda
    return META_CLASSES[kind](
        pipeline=pipe.name,
        description=pipe.description,
        stages=stages,
        pipeline_stages=list(pipe.stage_names),
        config=Config.from_dict(pipe.config.to_dict()),
        env=Env.from_dict(env),
        created=started.isoformat(),
        timing=Timing(
            warmup=0,
            requests=int(n_requests),
            clock="time.perf_counter_ns",
            sync="stage" if cuda else None,
            device_timer="cuda_events" if cuda else None,
        ),
        **sections,
    )
