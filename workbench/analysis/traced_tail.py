"""The slowest traced requests against the median ones: the traced run's flame graph, split by request.

A traced request is one ``ProfilerStep#N`` range (the runner steps the profiler per request): the
host events inside and the GPU work they launched; its time, its stage ranges' sum. The sets are
the tail attribution's (the ``ceil(5 % n)`` slowest, at least one, and p40-p60)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..trace import GPU_WORK_KINDS, HOST_KINDS, Trace
from .flame import flame_tree
from .tail import median_set
from .launches import call_table, launch_pair_summary, launch_summary, pair_table, steady
from .stacks import tree_rows
from .steps import count_and_sum_in, step_table
from .trace_stages import range_table
from .transfers import direction_rows, memcpy_summary

SLOW_FRACTION = 0.05


def request_windows(trace: Trace | pd.DataFrame) -> pd.DataFrame:
    """One row per traced request (:func:`.steps.step_table`), by start: ``step``, ``ts_ns``,
    ``end_ns``, ``stage_ns`` (the stage ranges starting inside it, summed)."""
    trace = Trace.of(trace)
    steps, stages = step_table(trace), range_table(trace)
    end = steps["ts_ns"] + steps["dur_ns"]
    _, stage_ns = count_and_sum_in(stages["ts_ns"], stages["dur_ns"], steps["ts_ns"], end)
    return pd.DataFrame(
        {"step": steps["step"], "ts_ns": steps["ts_ns"], "end_ns": end, "stage_ns": stage_ns}
    )


def traced_sets(windows: pd.DataFrame) -> dict[str, Any]:
    """``{"requests", "slowest", "median", "note"}``: step numbers of the two sets."""
    n = len(windows)
    if n == 0:
        note = "no traced request (no ProfilerStep range)"
        return {"requests": 0, "slowest": [], "median": [], "note": note}
    by_time = windows.sort_values(["stage_ns", "step"], ascending=[False, True], kind="stable")
    slow = by_time["step"].iloc[: max(1, math.ceil(SLOW_FRACTION * n))].tolist()
    times = pd.Series(windows["stage_ns"].to_numpy(np.int64), index=windows["step"].to_numpy())
    median = median_set(times).tolist()
    note = (
        f"the slow-request view rests on {n} traced requests: the slowest {len(slow)} against the median "
        f"{len(median)} (trace more requests with --traced for a steadier view)"
    )
    return {
        "requests": n,
        "slowest": [int(s) for s in slow],
        "median": [int(s) for s in median],
        "note": note,
    }


def in_windows(events: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """The host events starting inside one of the windows (by start), and the GPU work their calls
    launched."""
    ts = events["ts_ns"].to_numpy(np.int64)
    starts, ends = windows["ts_ns"].to_numpy(np.int64), windows["end_ns"].to_numpy(np.int64)
    k = np.searchsorted(starts, ts, side="right") - 1
    host = events["kind"].isin(HOST_KINDS).to_numpy()
    keep_host = host & (k >= 0) & (ts < ends[np.maximum(k, 0)])
    gpu = events["kind"].isin(GPU_WORK_KINDS).to_numpy()
    corr = pd.Series(pd.array(events["correlation"].array, dtype="Int64"))
    launched = set(corr[keep_host].dropna().tolist())
    keep_gpu = gpu & corr.isin(launched).to_numpy()
    return events[keep_host | keep_gpu]


def slow_minus_median(trace: Trace | pd.DataFrame) -> dict[str, Any]:
    """The slowest traced requests' flame tree against the median ones' (ns per request)."""
    trace = Trace.of(trace)
    events, windows = trace.events, request_windows(trace)
    sets = traced_sets(windows)
    if not sets["slowest"]:
        return sets | {"tree": []}
    trees = {}
    for name in ("slowest", "median"):
        chosen = windows[windows["step"].isin(sets[name])]
        tree = flame_tree(in_windows(events, chosen))
        paths: dict[int, tuple] = {}  # node -> its path of (name, kind) from the root
        trees[name] = {}  # path -> total ns per request
        columns = (tree[c].tolist() for c in ("id", "parent", "name", "kind", "total_ns"))
        for node, parent, label, kind, total in zip(*columns):
            paths[node] = paths.get(parent, ()) + ((label, kind),)
            trees[name][paths[node]] = total / max(len(chosen), 1)
    slow, median = trees["slowest"], trees["median"]

    def row(path: tuple) -> dict[str, Any]:
        name, kind = path[-1]
        return {
            "name": name,
            "kind": kind,
            "slow_ns": slow.get(path, 0.0),
            "median_ns": median.get(path, 0.0),
        }

    # both sets' paths as one tree, by depth then path
    return sets | {"tree": tree_rows(set(slow) | set(median), lambda p: (len(p), p), row)}


def request_slice(trace: Trace | pd.DataFrame, steps) -> Trace:
    """The trace of the traced requests numbered ``steps`` (:func:`in_windows`)."""
    trace = Trace.of(trace)
    windows = request_windows(trace)
    chosen = windows[windows["step"].isin(list(steps))]
    return Trace(in_windows(trace.events, chosen).reset_index(drop=True), meta=dict(trace.meta))


def set_view(trace: Trace | pd.DataFrame, steps) -> dict[str, Any]:
    """Launch and transfer figures of the traced requests ``steps``: ``{requests, launches,
    launch_pairs, copies, directions, per_request}`` (``per_request``: over the set's size)."""
    part = request_slice(trace, steps)
    n = len(list(steps))
    launches = launch_summary(steady(call_table(part), part))
    pairs = launch_pair_summary(steady(pair_table(part), part))
    copies = memcpy_summary(part)
    per = max(n, 1)
    return {
        "requests": n,
        "launches": launches,
        "launch_pairs": pairs,
        "copies": copies,
        "directions": direction_rows(part),
        "per_request": {
            "launch_count": launches["count"] / per,
            "launch_ns": launches["total_ns"] / per,
            "gpu_ns": pairs["gpu_dur_ns"] / per,
            "launch_delay_ns": pairs["launch_delay_ns"] / per,
            "copy_count": copies["count"] / per,
            "copy_ns": copies["total_ns"] / per,
            "copy_bytes": None if copies["bytes"] is None else copies["bytes"] / per,
        },
    }


def tail_views(trace: Trace | pd.DataFrame) -> dict[str, Any]:
    """The launch and transfer views of the slowest traced requests against the median ones."""
    trace = Trace.of(trace)
    sets = traced_sets(request_windows(trace))
    if not sets["slowest"]:
        return sets | {"slowest_view": None, "median_view": None}
    return sets | {
        "slowest_view": set_view(trace, sets["slowest"]),
        "median_view": set_view(trace, sets["median"]),
    }


def views_sentence(views: dict[str, Any]) -> str | None:
    """``"per traced request, slowest 3 against median 10: 12.0 against 9.0 launch calls ..."``;
    None without launches or copies in either set."""
    slow, median = views.get("slowest_view"), views.get("median_view")
    if not slow or not median:
        return None
    s, m = slow["per_request"], median["per_request"]
    if not (s["launch_count"] or m["launch_count"] or s["copy_count"] or m["copy_count"]):
        return None
    copied = [_bytes(v["copy_bytes"] or 0) for v in (s, m)]
    return (
        f"per traced request, slowest {slow['requests']} against median {median['requests']}: "
        f"{s['launch_count']:.1f} against {m['launch_count']:.1f} launch calls ({s['gpu_ns'] / 1e3:.1f} against "
        f"{m['gpu_ns'] / 1e3:.1f} us of GPU work), {s['copy_count']:.1f} against {m['copy_count']:.1f} copies "
        f"({copied[0]} against {copied[1]})"
    )


def _bytes(n: float) -> str:
    """``612 B``, ``4.1 KB``, ``12.6 MB`` (decimal units)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"
