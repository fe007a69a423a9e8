"""A batched run's tables in the run-record format (columns: docs/json.md) and its summaries,
live or simulated: the JSON of ``load`` and ``simulate``. Times are int64 ns from the origin.

``requests.batch`` -1: never dispatched. ``stages``: per request a ``batch_wait`` and a
``queue_wait`` row, then one per pipeline stage that ran (its batch's time), so ``budget()``
attributes end to end to waits and stages. A run whose generator lag p99 reaches
:data:`LAG_P99_LIMIT_MS` is marked ``behind_schedule``: ``gate`` will not judge it (exit 4).
"""

from __future__ import annotations

import math
import platform
import sys
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.stats import percentiles, summarize_ns
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
from ..units import NS_PER_MS, NS_PER_S, ms_to_ns, ns_to_ms
from .policy import wait_split

LAGGED_COLUMNS = {**LOAD_COLUMNS, "lag_ns": "int64"}  # a scheduled run's (batch -1: not dispatched)

# A generator lag p99 at or above this marks a run behind its schedule (and noisy): about 5x what
# the generator holds on a quiet machine (benchmarks/results/loadgen.md).
LAG_P99_LIMIT_MS = 1.0

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
            load = (arrival - origin_ns, batch_wait, queue_wait, service, rec.batch, late)
            req_rows.append(row | dict(zip(LAGGED_COLUMNS, load)))
            st_rows.append((rid, "batch_wait", 0, arrival - origin_ns, batch_wait, None))
            st_rows.append(
                (rid, "queue_wait", 1, arrival + batch_wait - origin_ns, queue_wait, None)
            )
            st_rows += stage_rows(rid, rec.timing, stage_names, origin_ns, first_index=2)
    for rid, arrival in dropped:
        late = lag(rid, arrival)
        start, dur = arrival - late - origin_ns, stopped_ns - arrival + late
        row = request_row(rid, False, start, dur, undispatched, 0)
        load = (arrival - origin_ns, stopped_ns - arrival, 0, 0, -1, late)
        req_rows.append(row | dict(zip(LAGGED_COLUMNS, load)))
    return build_tables(req_rows, st_rows, LAGGED_COLUMNS)


SIMULATION_STAGES = ["batch_wait", "queue_wait", "service"]


def simulation_run(sim, pipeline: str | None, sources: list[str], created: str):
    """A ``Simulation`` as a run record (``sources``: the service run folders): each request
    succeeds, its stages ``batch_wait``, ``queue_wait`` and ``service`` back to back (nothing
    unattributed)."""
    names = ("request", "dur_ns", "batch_size", *LOAD_COLUMNS)
    col = {c: sim.requests[c].to_numpy(dtype="int64") for c in names}
    requests = pd.DataFrame(
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
            "stage": np.tile(np.array(SIMULATION_STAGES, dtype=object), len(requests)),
            "stage_index": np.tile(np.arange(k), len(requests)),
            "start_ns": starts.ravel(),
            "dur_ns": durs.ravel(),
            "device_dur_ns": pd.array([None] * durs.size, dtype="Int64"),
        }
    )
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
                "capacity_rps": sim.capacity_rps if np.isfinite(sim.capacity_rps) else None,
                "rate_rps": sim.rate_rps if np.isfinite(sim.rate_rps) else None,
                "stable": bool(sim.stable),
                "service_runs": list(sources),
            }
        ),
    )
    requests = typed_table(requests, {**REQUEST_COLUMNS, **LOAD_COLUMNS})
    return Run(meta=meta, requests=requests, stages=typed_table(stages, STAGE_COLUMNS))


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


COMPONENTS = {
    "end_to_end": "dur_ns",
    "batch_wait": "batch_wait_ns",
    "queue_wait": "queue_wait_ns",
    "service": "service_ns",
}
SHOWN = ("batch_wait", "queue_wait", "service", "end_to_end")  # the components in table order
# a scheduled run's extra components: due to sent, and sent to done (end to end minus the lag)
SCHEDULED = ("send_lag", "from_send")
# The summary's figures a run record keeps in its ``load`` (live, load --url and served runs alike).
LOAD_META_KEYS = (
    "throughput_rps",
    "mean_batch_size",
    "utilization",
    "batch_sizes",
    "requests",
    "failed",
    "batches",
)


def batch_table(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per dispatched batch: ``batch``, ``size``, ``start_ns``, ``service_ns``."""
    ran = requests[requests["batch"] >= 0]  # -1: never dispatched (a run stopped at its deadline)
    start = ran["arrival_ns"] + ran["batch_wait_ns"] + ran["queue_wait_ns"]
    grouped = ran.assign(start_ns=start).groupby("batch", sort=True)
    out = grouped.agg(
        size=("batch", "size"), start_ns=("start_ns", "first"), service_ns=("service_ns", "first")
    )
    return out.reset_index().astype("int64")


def load_summary(requests: pd.DataFrame, concurrency: int = 1) -> dict[str, Any]:
    """Percentiles of each of :data:`COMPONENTS` (and, scheduled, :data:`SCHEDULED`), throughput
    (successful requests over first arrival to last completion), ``mean_batch_size``,
    ``utilization`` (service time over ``concurrency`` times the span to the last dispatched
    request's end) and ``batch_sizes`` (``{size: batches}``)."""
    ok = requests[requests["ok"].astype(bool)]
    out: dict[str, Any] = {
        name: summarize_ns(ok[col].to_numpy(dtype=np.int64)) for name, col in COMPONENTS.items()
    }
    if "lag_ns" in requests.columns:
        lag = ok["lag_ns"].to_numpy(dtype=np.int64)
        out["send_lag"] = summarize_ns(lag)
        out["from_send"] = summarize_ns(ok["dur_ns"].to_numpy(dtype=np.int64) - lag)
    batches = batch_table(requests)
    span = _span_ns(requests)
    out["throughput_rps"] = len(ok) * NS_PER_S / span if span > 0 else None
    out["mean_batch_size"] = float(batches["size"].mean()) if len(batches) else None
    busy_span = max(span, _span_ns(requests, requests["batch"] >= 0))
    out["utilization"] = (
        float(batches["service_ns"].sum()) / (concurrency * busy_span) if span > 0 else None
    )
    out["batch_sizes"] = {
        str(k): int(v) for k, v in batches["size"].value_counts().sort_index().items()
    }
    out["requests"] = int(len(requests))
    out["failed"] = int(len(requests) - len(ok))
    out["batches"] = int(len(batches))
    return out


def percentile_requests(requests: pd.DataFrame, percentiles=(50, 99)) -> pd.DataFrame:
    """The successful request at each percentile (nearest rank) of end to end with its own parts
    (``*_ms``), which add up to its end to end as percentiles of each part do not."""
    ok = requests[requests["ok"].astype(bool)].sort_values(["dur_ns", "request"], kind="stable")
    rows = []
    for q in percentiles if len(ok) else ():  # no successful request: an empty table
        r = ok.iloc[max(math.ceil(q / 100 * len(ok)) - 1, 0)]
        parts = {f"{c}_ms": int(r[COMPONENTS[c]]) / NS_PER_MS for c in SHOWN}
        rows.append({"percentile": q, "request": int(r["request"]), **parts})
    return pd.DataFrame(rows, columns=["percentile", "request", *(f"{c}_ms" for c in SHOWN)])


def load_meta_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """The :data:`LOAD_META_KEYS` of a :func:`load_summary`: what a run's ``load`` records of it."""
    return {k: summary[k] for k in LOAD_META_KEYS}


def load_section(
    summary: dict[str, Any] | None, lags_ns, arrivals, policy: dict | None
) -> dict[str, Any]:
    """What every load run's ``load`` records: the summary's figures (None: it failed), the lag, the
    arrival process and the policy (None: the server did not say it)."""
    figures = (load_meta_figures(summary) if summary is not None else {}) | lag_summary(lags_ns)
    return figures | {"arrivals": arrivals.params(), "policy": policy}


def _span_ns(requests: pd.DataFrame, finished: pd.Series | None = None) -> int:
    """First arrival to the last completion (ns) of ``finished`` (default: successful) requests."""
    done = requests[requests["ok"].astype(bool) if finished is None else finished]
    if done.empty:
        return 0
    return int((done["arrival_ns"] + done["dur_ns"]).max() - requests["arrival_ns"].min())


def format_summary(summary: dict[str, Any]) -> str:
    """A text table of the components (ms; columns widen to fit) and the load figures."""
    keys = ("mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms")
    shown = [*SHOWN, *(n for n in SCHEDULED if n in summary)]
    values = [summary[n][k] for n in shown for k in keys if summary[n][k] is not None]
    width = max([10, *(len(f"{v:.3f}") + 1 for v in values)])
    lines = [f"{'component':<12}{'count':>9}" + "".join(f"{k[:-3]:>{width}}" for k in keys)]
    for name in shown:
        s = summary[name]
        cells = "".join(
            f"{s[k]:{width}.3f}" if s[k] is not None else f"{'-':>{width}}" for k in keys
        )
        lines.append(f"{name.replace('_', ' '):<12}{s['count']:>9}{cells}")
    tput, mbs, util = (summary.get(k) for k in ("throughput_rps", "mean_batch_size", "utilization"))
    # a server that does not say its batches (any POST /predict) has neither of the last two
    mbs = "-" if mbs is None else f"{mbs:.2f}"
    util = "-" if util is None else f"{util * 100:.1f}%"
    lines.append(
        f"throughput {tput:.1f} req/s, mean batch size {mbs}, utilization {util}"
        if tput is not None
        else "throughput - (no request completed)"
    )
    if summary.get("failed"):
        lines.append(f"failed requests: {summary['failed']} of {summary['requests']}")
    return "\n".join(lines)


def lag_percentiles(lags_ns: np.ndarray) -> dict[str, float]:
    """``{p50_ms, p99_ms, max_ms}`` of the generator's lag (0 for an empty run)."""
    if lags_ns.size == 0:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    values = (*percentiles(lags_ns, [50, 99]), lags_ns.max())
    return {k: ns_to_ms(float(v)) for k, v in zip(("p50_ms", "p99_ms", "max_ms"), values)}


def lag_summary(lags_ns: np.ndarray, late_threshold_ms: float = 1.0) -> dict[str, Any]:
    """The load meta's lag keys: worst and p99 lag, ``late_requests`` (lag > threshold) and
    ``behind_schedule``."""
    lag = lag_percentiles(lags_ns)
    return {
        "generator_lag_ms": lag["max_ms"],
        "generator_lag_p99_ms": lag["p99_ms"],
        "late_requests": int((lags_ns > ms_to_ns(late_threshold_ms)).sum()),
        "late_threshold_ms": late_threshold_ms,
        "behind_schedule": behind_schedule(lag["p99_ms"]),
        "lag_p99_limit_ms": LAG_P99_LIMIT_MS,
    }


def behind_schedule(lag_p99_ms: float | None) -> bool:
    """Whether a run's ``load.generator_lag_p99_ms`` (None: not scheduled) reaches the limit."""
    return lag_p99_ms is not None and lag_p99_ms >= LAG_P99_LIMIT_MS


def lag_noise(noise: dict[str, Any], lag: dict[str, float]) -> dict[str, Any]:
    """A run's noise record with ``generator_lag_p99_ms``, and ``noisy`` for a lag at the limit."""
    out = dict(noise) | {"generator_lag_p99_ms": lag["p99_ms"]}
    if lag["p99_ms"] < LAG_P99_LIMIT_MS:
        return out
    reasons = list(out.get("reasons") or []) if out.get("noisy") is not None else []
    reasons.append(
        f"the load generator fell behind its schedule: lag p99 {lag['p99_ms']:.3f} ms "
        f"(max {lag['max_ms']:.3f} ms) >= {LAG_P99_LIMIT_MS:g} ms: the client could not hold this "
        "rate here (a busy machine, or a rate above what it can send)"
    )
    fix = "a lower --rate, or the load generator on another machine"
    return out | {
        "noisy": True,
        "reasons": reasons,
        "fix": fix if not out.get("fix") else f"{out['fix']} or {fix}",
    }
