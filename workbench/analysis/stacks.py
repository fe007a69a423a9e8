"""Where the slow requests' time goes, from the sampled Python stacks of every timed request.

Input: the timing run's stack samples (:mod:`workbench.sampling`) with their request and stage.
The sets are the tail attribution's; per stage and set, a frame's (file and function, recursion
once) share is the fraction of the set's samples in that stage whose stack holds it: samples are
evenly spaced, so the share of time. Out: ``stacks`` (STACKS in docs/json.md); the headline names
the ``lead`` frame (:func:`_lead`); a stage under :data:`MIN_SAMPLES` tail samples has none."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pandas as pd

from .tail import measured_ok, request_sets, shares, stage_matrix

MIN_SAMPLES = 20
DRILL_SHARE = 0.8
MIN_NODE_SHARE = 0.01  # frames and tree nodes under this share of both sets' samples are left out
MAX_FRAMES = 12
SITE_DIRS = ("site-packages", "dist-packages")


def frame_name(file: str, function: str) -> str:
    """``redis read_response`` for a library frame (top package or stdlib module), the function
    alone for the user's own code (:func:`call_site` adds file and line)."""
    parts = file.replace("\\", "/").split("/")
    for site in SITE_DIRS:
        if site in parts:
            after = parts[parts.index(site) + 1 :]
            if after:
                return f"{after[0].removesuffix('.py')} {function}"
    for i, part in enumerate(parts[:-1]):
        if part.startswith("python3") and i > 0 and parts[i - 1] == "lib":  # stdlib: socket recv
            return f"{parts[i + 1].removesuffix('.py')} {function}"
    return function


def call_site(file: str, function: str, line: int) -> str:
    """``get_features (recommend.py:143)``."""
    return f"{function} ({os.path.basename(file)}:{line})"


def stack_summary(
    samples: pd.DataFrame,
    stacks: list,
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    order: list[str],
    *,
    interval_s: float,
    unassigned: int = 0,
) -> dict[str, Any] | None:
    """The ``stacks`` object; ``samples``: request, stage, stack (an index into ``stacks``)."""
    if samples.empty or measured_ok(requests, stages)[0].empty:
        return None  # no sample, or no measured request succeeded (every one timed out: no tail to compare)
    wide = stage_matrix(requests, stages, order)
    sets = {name: ids for name, ids in request_sets(wide).items() if ids is not None}
    tail_set = "slowest_1pct" if "slowest_1pct" in sets else "slowest_5pct"
    out = _summary(samples, stacks, wide, order, sets, tail_set, interval_s)
    top = out["headline_stage"]
    if tail_set == "slowest_1pct" and top and not out["stages"].get(top, {}).get("enough"):
        out = _summary(samples, stacks, wide, order, sets, "slowest_5pct", interval_s)
    del out["headline_stage"]
    return {
        "interval_ms": interval_s * 1e3,
        "samples": int(len(samples)),
        "unassigned": int(unassigned),
    } | out


def _summary(
    samples, stacks, wide, order, sets, tail_set: str, interval_s: float
) -> dict[str, Any]:
    """``tail_set``, ``stages``, ``headline`` and ``headline_stage`` against one tail set."""
    out_stages = {}
    sizes = {name: len(ids) for name, ids in sets.items()}
    for stage in order:
        mine = samples[samples["stage"] == stage]
        if mine.empty:
            continue
        by_set = {
            name: mine.loc[mine["request"].isin(ids), "stack"].tolist()
            for name, ids in sets.items()
        }
        out_stages[stage] = _stage_entry(by_set, stacks, tail_set, sizes, interval_s * 1e3)
    tail_shares = shares(wide, sets[tail_set], order) if len(sets[tail_set]) else {}
    top = max(order, key=lambda s: tail_shares.get(s, 0.0)) if tail_shares else None
    return {
        "tail_set": tail_set,
        "stages": out_stages,
        "headline": headline(out_stages.get(top), top, tail_set) if top else None,
        "headline_stage": top,
    }


def _stage_entry(
    by_set: dict[str, list[int]],
    stacks: list,
    tail_set: str,
    sizes: dict[str, int],
    interval_ms: float,
) -> dict[str, Any]:
    counts = {name: _frame_counts(ids, stacks) for name, ids in by_set.items()}
    n = {name: len(ids) for name, ids in by_set.items()}
    callers = _callers(by_set[tail_set] + by_set["median"], stacks)
    keys = {
        k
        for name, c in counts.items()
        for k, v in c.items()
        if n[name] and v / n[name] >= MIN_NODE_SHARE
    }
    depth = _depths(by_set[tail_set], stacks)
    rows = []
    for key in keys:
        share = {name: (counts[name][key] / n[name] if n[name] else None) for name in by_set}
        growth = (share[tail_set] or 0.0) - (share["median"] or 0.0)
        per_request = {  # the frame's sampled time per request of each set, in ms
            name: counts[name][key] * interval_ms / sizes[name] if sizes[name] else None
            for name in by_set
        }
        growth_ms = (per_request[tail_set] or 0.0) - (per_request["median"] or 0.0)
        rows.append(
            {
                "frame": frame_name(*key),
                "file": key[0],
                "function": key[1],
                "caller": callers.get(key),
                "slowest_1pct": share.get("slowest_1pct"),
                "slowest_5pct": share.get("slowest_5pct"),
                "median": share["median"],
                "growth": growth,
                "ms_per_request": per_request,
                "growth_ms": growth_ms,
            }
        )

    def depth_of(row: dict[str, Any]) -> int:
        return depth.get((row["file"], row["function"]), 0)

    rows.sort(key=lambda r: (-r["growth_ms"], -depth_of(r), r["file"], r["function"]))
    return {
        "samples": n,
        "frames": rows[:MAX_FRAMES],
        "lead": _lead(rows, depth_of),
        "enough": n[tail_set] >= MIN_SAMPLES,
        "tree": differential_tree(by_set[tail_set], by_set["median"], stacks),
    }


def _lead(rows: list[dict[str, Any]], depth_of) -> dict[str, Any] | None:
    """The headline's frame: the deepest growing by ``DRILL_SHARE`` of the largest growth."""
    if not rows or rows[0]["growth_ms"] <= 0:
        return None
    near = [r for r in rows if r["growth_ms"] >= DRILL_SHARE * rows[0]["growth_ms"]]
    return dict(max(near, key=lambda r: (depth_of(r), r["growth_ms"])))


def _frame_counts(ids: list[int], stacks: list) -> Counter:
    """(file, function) -> samples whose stack holds it (once per sample)."""
    out: Counter = Counter()
    for sid, k in Counter(ids).items():
        for key in {(f, fn) for f, fn, _ in stacks[sid]}:
            out[key] += k
    return out


def _callers(ids: list[int], stacks: list) -> dict[tuple[str, str], str]:
    """(file, function) -> the call site most samples reach it from."""
    seen: dict[tuple[str, str], Counter] = {}
    for sid, k in Counter(ids).items():
        frames = stacks[sid]
        for above, below in zip(frames, frames[1:]):
            seen.setdefault((below[0], below[1]), Counter())[above] += k
    return {key: call_site(*c.most_common(1)[0][0]) for key, c in seen.items()}


def _depths(ids: list[int], stacks: list) -> dict[tuple[str, str], int]:
    """(file, function) -> its deepest position in the stacks (ties in growth go deeper)."""
    out: dict[tuple[str, str], int] = {}
    for sid in set(ids):
        for i, (f, fn, _) in enumerate(stacks[sid]):
            if out.get((f, fn), -1) < i:
                out[(f, fn)] = i
    return out


def differential_tree(
    tail_ids: list[int], median_ids: list[int], stacks: list
) -> list[dict[str, Any]]:
    """Stacks merged by path, parents first: id, parent, name, tail, median (shares of samples)."""
    nodes: dict[tuple, dict[str, Any]] = {}
    for which, ids in (("tail", tail_ids), ("median", median_ids)):
        total = len(ids)
        for sid, k in Counter(ids).items():
            path: tuple = ()
            for f, fn, _ in stacks[sid]:
                parent = nodes[path]["id"] if path else -1
                path = path + ((f, fn),)
                new = {"id": len(nodes), "parent": parent, "name": frame_name(f, fn)}
                node = nodes.setdefault(path, new | {"tail": 0.0, "median": 0.0})
                node[which] += k / total
    kept = [n for n in nodes.values() if max(n["tail"], n["median"]) >= MIN_NODE_SHARE]
    ids = {n["id"] for n in kept}
    return [n for n in kept if n["parent"] == -1 or n["parent"] in ids]


def tree_rows(paths, key, row) -> list[dict[str, Any]]:
    """``{"id", "parent"} | row(path)`` per path (a tuple from the root) in ``key`` order, a parent
    before its children; a path whose parent is not among them is left out, with its subtree."""
    ids: dict[tuple, int] = {}
    for path in sorted(paths, key=key):
        if len(path) == 1 or path[:-1] in ids:
            ids[path] = len(ids)
    return [{"id": i, "parent": ids.get(p[:-1], -1)} | row(p) for p, i in ids.items()]


def headline(entry: dict[str, Any] | None, stage: str, tail_set: str) -> str | None:
    """``hydrate, 91 % of the slowest 1 % in redis read_response <- get_features (...); ...``."""
    if not entry or not entry["enough"] or not entry["lead"]:
        return None
    best = entry["lead"]
    label = "1 %" if tail_set == "slowest_1pct" else "5 %"
    caller = f" <- {best['caller']}" if best.get("caller") else ""
    median = f"the median set has no samples in {stage}"  # a busy machine's sampler missed them
    if best["median"] is not None:
        median = f"median {100 * best['median']:.0f} %"
    return (
        f"{stage}, {100 * best[tail_set]:.0f} % of the slowest {label} in {best['frame']}{caller}; "
        f"{median}"
    )


def samples_frame(request: list[int], stage: list[str], stack: list[int]) -> pd.DataFrame:
    """The samples as a table (``request``, ``stage``, ``stack``)."""
    return pd.DataFrame(
        {
            "request": pd.array(request, dtype="int64"),
            "stage": pd.array(stage, dtype=object),
            "stack": pd.array(stack, dtype="int64"),
        }
    )
