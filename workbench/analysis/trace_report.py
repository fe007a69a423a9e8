"""``analyze``: every trace analysis in one JSON-ready dict (``workbench analyze TRACE --json``).

Times are float microseconds (``*_us``), counts ints. Every key is always present: counts 0, figures
that do not exist for the trace None, lists empty; ``memcpy.by_kind`` always lists HtoD, DtoH and
DtoD. Every section reads the trace's numpy columns: ``analyze`` imports neither pandas nor pyarrow.
``top_ops`` is torch's ``key_averages()`` table: self time is an operator's duration less the host
events directly nested in it (:func:`nest`), so self times add up."""

from __future__ import annotations

import math
import os

import numpy as np

from ..trace import HOST_KINDS, KIND_CPU_OP, KINDS, Trace, load_trace
from ..trace.columns import factorize_objects
from ..units import NS_PER_US
from . import gpu_timeline, launches, steps, trace_stages, transfers

_BREAKDOWN = (*steps.CATEGORIES, "other", "total")
_STEP_COLUMNS = ("name", "dur_us", "kernel_count", "kernel_us", "memcpy_us", "memset_us")


def _missing(value) -> bool:
    """None, NaN or pandas.NA (recognised without importing pandas)."""
    is_nan = isinstance(value, float) and math.isnan(value)
    return value is None or is_nan or type(value).__name__ == "NAType"


def us(ns) -> float | None:
    """ns -> float us; None/NaN stay None."""
    return None if _missing(ns) else float(ns) / NS_PER_US


def _pick(row: dict, *keys: str) -> dict:
    """``keys`` of ``row`` as plain JSON values; a ``*_us`` key is the row's ``*_ns`` in us."""
    return {
        k: us(row[f"{k[:-3]}_ns"])
        if k.endswith("_us") and f"{k[:-3]}_ns" in row
        else (row[k].item() if hasattr(row[k], "item") else row[k])
        for k in keys
    }


def _column_rows(table: dict) -> list[dict]:
    return [dict(zip(table, values)) for values in zip(*table.values())]


def analyze(trace_or_path: Trace | str | os.PathLike, progress=None) -> dict:
    """Load (if given a path) and run every section on one :class:`~workbench.trace.Trace`; a dict
    of plain JSON types. ``progress(stage, done, total)`` hears of the loading and each section."""
    model = trace_or_path
    if not isinstance(model, Trace):
        model = load_trace(trace_or_path, progress=progress)
    report = {}
    for done, (key, section) in enumerate(SECTIONS.items(), start=1):
        report[key] = section(model)
        if progress is not None:
            progress("analyze", done, len(SECTIONS))
    return report


def _trace(model: Trace) -> dict:
    return {
        "path": str(model.path),
        "schema": model.meta.get("schema"),
        "platform": model.meta.get("platform"),
        "events": len(model),
        "devices": [d.get("name") for d in model.device_properties if isinstance(d, dict)],
    }


def _top_ops(model: Trace, n: int = 15) -> list[dict]:
    return [
        _pick(r, "name")
        | {"input_shapes": r["input_shapes"] or None}
        | _pick(r, "calls", "total_us", "self_us", "self_share")
        for r in operator_rows(model, n)
    ]


def _kernels(model: Trace) -> dict:
    s = gpu_timeline.kernel_summary(model)
    return {
        **_pick(s, "count", "total_us", "under_10us", "busy_us"),
        "top": [
            _pick(r, "name", "count", "total_us") | {"share": float(r["share"])}
            for r in gpu_timeline.kernel_rows(model, 10)
        ],
    }


def _copy_rows(rows: list[dict], key: str) -> dict:
    return {
        r[key]: {
            "count": r["count"],
            "total_us": us(r["total_ns"]),
            "bytes": None if _missing(r["bytes"]) else int(r["bytes"]),
            "gb_per_s": None if math.isnan(r["gb_per_s"]) else float(r["gb_per_s"]),
        }
        for r in rows
    }


def _memcpy(model: Trace) -> dict:
    s = transfers.memcpy_summary(model)
    return {
        **_pick(s, "count", "total_us", "bytes"),
        "by_kind": _copy_rows(transfers.direction_rows(model), "direction"),
        "by_kind_and_host_memory": _copy_rows(transfers.host_memory_rows(model), "key"),
    }


def _launches(model: Trace) -> dict:
    s = launches.launch_summary(launches.call_table(model))
    cold = launches.cold_start_summary(model)
    return _pick(s, "count", "total_us", "graph_count", "graph_total_us", "graph_gpu_count") | {
        "cold_start": _pick(cold, "calls", "dur_us")
    }


def _pairs(model: Trace) -> dict:
    pairs = launches.pair_table(model)
    s = launches.launch_pair_summary(pairs)
    counts = ("count", "cpu_over_50us", "delay_over_100us", "gpu_shorter_than_cpu", "short_kernels")
    return {
        **_pick(s, *counts),
        "cpu_us": us(s["cpu_dur_ns"]),
        "gpu_us": us(s["gpu_dur_ns"]),
        **_pick(s, "launch_delay_us"),
        "distribution": {
            r["metric"]: {k: us(r[f"{k}_ns"]) for k in ("mean", "p50", "p90", "p95", "p99", "max")}
            for r in launches.distribution_rows(pairs)
        },
    }


def _gpu(model: Trace) -> dict:
    s = gpu_timeline.gpu_time_summary(model)
    columns = ("device", "stream", "count", "idle_us", "host_wait_us", "kernel_wait_us", "other_us")
    return {
        **_pick(s, "span_us", "busy_us", "idle_us", "idle_fraction"),
        "streams": [_pick(r, *columns) for r in gpu_timeline.stream_idle_rows(model)],
    }


def _breakdown(model: Trace) -> list[dict]:
    t = steps.breakdown_table(model)
    return [
        {"step": int(label) if label.isdigit() else label}
        | {f"{c}_us": us(t[f"{c}_ns"][i]) for c in _BREAKDOWN}
        for i, label in enumerate(t["step"])
    ]


def _stages(model: Trace) -> list[dict]:
    columns = (
        *("stage", "count", "host_us", "gpu_us", "kernel_count", "launch_count", "launch_us"),
        *("transfer_bytes", "transfer_us", "sync_us"),
        *("launch_bound", "transfer_bound", "sync_heavy"),
    )
    return [_pick(r, *columns) for r in _column_rows(trace_stages.stage_summary_table(model))]


# Report sections in output order: key -> function of the trace (a dict of plain JSON types).
SECTIONS = {
    "trace": _trace,
    "kernels": _kernels,
    "memcpy": _memcpy,
    "memset": lambda m: _pick(transfers.memset_summary(m), "count", "total_us", "bytes"),
    "launches": _launches,
    "launch_pairs": _pairs,
    "launch_verdict": lambda m: dict(
        zip(("launch_bound", "sentence"), trace_stages.launch_verdict(m))
    ),
    "gpu": _gpu,
    "sync_calls": lambda m: [_pick(r, "name", "count", "total_us") for r in transfers.sync_rows(m)],
    "steps": lambda m: [_pick(r, *_STEP_COLUMNS) for r in _column_rows(steps.step_table(m))],
    "step_breakdown": _breakdown,
    "stages": _stages,
    "top_ops": _top_ops,
}


OPERATOR_COLUMNS = ["name", "input_shapes", "calls", "total_ns", "self_ns", "self_share"]


def operator_call_table(trace: Trace) -> dict[str, np.ndarray]:
    """One entry per operator call, in nesting order: ``name``, ``input_shapes`` ("" when not
    recorded), ``dur_ns``, ``self_ns``, ``name_code``."""
    host = trace.rows_of(HOST_KINDS)
    lane = host.pid.codes * (host.tid.labels.size + 1) + host.tid.codes
    order = nesting_order(lane, host.ts_ns, host.dur_ns)
    ts, dur, lane = host.ts_ns[order], host.dur_ns[order], lane[order]
    parent, _ = nest(lane, ts, ts + dur)
    child_sum = np.zeros(len(dur), dtype=np.int64)
    has_parent = parent >= 0
    np.add.at(child_sum, parent[has_parent], dur[has_parent])
    is_op = host.kind[order] == KINDS.index(KIND_CPU_OP)
    if host.shapes is not None:  # recorded with record_shapes=True; "" for events without shapes
        shapes = np.array(["" if s is None else s for s in host.shapes[order]], dtype=object)
    else:
        shapes = np.full(len(order), "", dtype=object)
    return {
        "name": host.name.take(order).values()[is_op],
        "input_shapes": shapes[is_op],
        "dur_ns": dur[is_op],
        "self_ns": np.maximum(dur - child_sum, 0)[is_op],
        "name_code": host.name.codes[order][is_op],
    }


def operator_rows(trace: Trace, n: int = 20, by_shapes: bool = True) -> list[dict]:
    """The ``n`` operators with the most self time, as dicts of :data:`OPERATOR_COLUMNS`
    (``self_share``: of every operator's self time)."""
    calls = operator_call_table(trace)
    shape_codes, _ = factorize_objects(
        calls["input_shapes"].tolist() if by_shapes else [""] * calls["name"].size
    )
    pair = calls["name_code"] * (int(shape_codes.max(initial=0)) + 1) + shape_codes
    distinct, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # groups in order of first appearance
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    codes = rank[inverse.reshape(-1)]
    firsts = first[order]
    shapes = calls["input_shapes"] if by_shapes else np.full(calls["name"].size, "", dtype=object)
    keys = list(zip(calls["name"][firsts].tolist(), shapes[firsts].tolist()))
    count = np.bincount(codes, minlength=len(keys)).astype(np.int64)
    total = np.zeros(len(keys), np.int64)
    own = np.zeros(len(keys), np.int64)
    np.add.at(total, codes, calls["dur_ns"])
    np.add.at(own, codes, calls["self_ns"])
    total_self = int(own.sum())
    rows = [
        {
            "name": name,
            "input_shapes": shape,
            "calls": int(c),
            "total_ns": int(t),
            "self_ns": int(s),
            "self_share": s / total_self if total_self else 0.0,
        }
        for (name, shape), c, t, s in zip(keys, count, total, own)
    ]
    rows.sort(key=lambda r: (-r["self_ns"], r["name"]))  # stable: ties keep first appearance
    return rows[:n]


# The one nesting rule for host events, shared by the flame tree and the request chart so an event
# sits at the same depth in both. Walk one lane's (thread's) events by start, longest first on ties,
# keeping a stack of open events; before an event pop those that ended (``end <= start``), then
# those that cannot hold it (ending more than NEST_SLACK_NS before it does). The parent is the
# stack's top. Linear after sorting, whatever the depth or overlap.
NEST_SLACK_NS = 1_000  # one microsecond: the rounding of traces with integer-us timestamps


def nesting_order(lane: np.ndarray, ts_ns: np.ndarray, dur_ns: np.ndarray) -> np.ndarray:
    """The order :func:`nest` needs: by lane, then start, then longest first."""
    return np.lexsort((-np.asarray(dur_ns), np.asarray(ts_ns), np.asarray(lane)))


def nest(
    lane: np.ndarray, ts_ns: np.ndarray, end_ns: np.ndarray, slack_ns: int = NEST_SLACK_NS
) -> tuple[np.ndarray, np.ndarray]:
    """Parent position (-1 for none) and depth (0 outermost) of each event, inputs in
    :func:`nesting_order` (integer ns). Properly nested input is answered with numpy
    (:func:`_nest_nested`); any partial overlap goes to the stack walk (:func:`_nest_walk`), the
    rule."""
    lane, ts_ns, end_ns = (np.asarray(a, dtype=np.int64) for a in (lane, ts_ns, end_ns))
    fast = _nest_nested(lane, ts_ns, end_ns)
    return fast if fast is not None else _nest_walk(lane, ts_ns, end_ns, slack_ns)


def _nest_walk(
    lane: np.ndarray, ts_ns: np.ndarray, end_ns: np.ndarray, slack_ns: int
) -> tuple[np.ndarray, np.ndarray]:
    """The rule itself: a stack walk."""
    lanes, starts, ends = lane.tolist(), ts_ns.tolist(), end_ns.tolist()
    parent = [-1] * len(starts)
    depth = [0] * len(starts)
    stack: list[int] = []
    current = None
    for i, start in enumerate(starts):
        if lanes[i] != current:
            stack.clear()
            current = lanes[i]
        while stack and ends[stack[-1]] <= start:
            stack.pop()
        while stack and ends[stack[-1]] + slack_ns < ends[i]:
            stack.pop()
        if stack:
            parent[i] = top = stack[-1]
            depth[i] = depth[top] + 1
        stack.append(i)
    return np.array(parent, dtype=np.int64), np.array(depth, dtype=np.int64)


def _nest_nested(
    lane: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_nest_walk`'s answer when no event outlives its parent (checked), else None: depth =
    the lane's earlier events still open at the start; parent = the last earlier one a level up."""
    n = ts.size
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    index = np.arange(n, dtype=np.int64)
    lane_first = np.maximum.accumulate(np.where(np.r_[True, lane[1:] != lane[:-1]], index, 0))
    ended = _ends_up_to_start(lane, ts, end, lane_first) - _zero_after(lane, ts, end)
    depth = (index - lane_first) - ended  # the lane's earlier events still open
    # (depth, position), unique; sorted order lists each level left to right
    ordered = np.sort(depth * n + index)
    at = np.searchsorted(ordered, (depth - 1) * n + index) - 1
    parent = np.where(depth > 0, ordered[np.maximum(at, 0)] % n, -1)
    p = np.maximum(parent, 0)
    child = depth > 0
    ok = ~child | (
        (at >= 0) & (depth[p] == depth - 1) & (lane[p] == lane) & (end[p] > ts) & (end <= end[p])
    )
    return (parent, depth) if ok.all() else None


def _ends_up_to_start(lane, ts, end, lane_first) -> np.ndarray:
    """Per event: how many events of its lane end at or before its start (ends first on ties)."""
    n = ts.size
    kind = np.r_[np.zeros(n, np.int8), np.ones(n, np.int8)]  # 0: an end, 1: a start
    order = np.lexsort((kind, np.r_[end, ts], np.r_[lane, lane]))
    ends_so_far = np.cumsum(kind[order] == 0)
    where = np.empty(n, np.int64)
    starts = np.flatnonzero(kind[order] == 1)
    where[order[starts] - n] = starts
    return ends_so_far[where] - lane_first  # earlier lanes' ends all sort first: lane_first of them


def _zero_after(lane, ts, end) -> np.ndarray:
    """Per event: zero-length events of its lane starting with it, at its position or later
    (they end at its start but are not before it)."""
    n = ts.size
    same = np.r_[False, (lane[1:] == lane[:-1]) & (ts[1:] == ts[:-1])]
    group = np.cumsum(~same) - 1
    last = np.r_[np.flatnonzero(~same)[1:] - 1, n - 1][group]
    zeros = np.bincount(group, weights=(end == ts), minlength=group[-1] + 1).astype(np.int64)[group]
    first_zero = last - zeros + 1  # zero-length events sort last among equal starts
    return np.where(np.arange(n) < first_zero, zeros, last - np.arange(n) + 1)


def nesting_depth(ts_ns: np.ndarray, dur_ns: np.ndarray) -> np.ndarray:
    """Depth of each interval of one lane (sorted by start, longest first on ties)."""
    ts_ns = np.asarray(ts_ns, dtype=np.int64)
    end_ns = ts_ns + np.asarray(dur_ns, dtype=np.int64)
    return nest(np.zeros(ts_ns.size, np.int64), ts_ns, end_ns)[1]
