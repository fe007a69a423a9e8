"""Why the slow requests waited: the sampler's classes of their time, and what ran meanwhile.

Input: ``RunMeta.sampled`` (:mod:`workbench.sampling`'s rows, each class of
:mod:`workbench.wait_classes`) and the run's tables. A stage sample belongs to the request and stage
whose ``[start, end)`` holds it (in overlapping load batches, the last started: an approximation)
and stands for the time since the previous sample (``dt_ns``). Collections are timed exactly: each
one's overlap with a stage call is ``gc`` time. The sets are the tail attribution's (slowest 1 %
with :data:`MIN_SAMPLES` samples, else 5 %; median p40-p60). Out: ``waits`` (WAITS in
docs/json.md); the headline names the first cause with positive excess that is not ``off_cpu``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from ..record.meta import ServedMeta
from ..units import ns_to_ms
from ..wait_classes import LATE_STAGE, is_user_file
from .tail import measured_ok, request_sets, stage_matrix
from .stacks import MIN_NODE_SHARE, call_site, frame_name, tree_rows

MIN_SAMPLES = 20
LATE_ROW = 2  # ``in_stage`` of a row the sampler took of a thread due and not yet in a stage
MAX_MEANWHILE = 3
WAIT_WORDS = {
    "lock": "waiting on a lock",
    "gil": "waiting for the GIL",
    "io": "waiting on I/O",
    "sleep": "sleeping",
    "device": "waiting on the device",
    "gc": "paused by garbage collection",
    "off_cpu": "off CPU",
}


def waits_note(meta) -> str | None:
    """Where a ``load --url`` client run's waits are: it cannot sample the server's threads."""
    serving = meta.serving if isinstance(meta, ServedMeta) else None
    if serving is None or serving.role != "client" or not serving.server_timing:
        return None
    return (
        "the served stages ran in the server's process, which samples its own threads: "
        "`workbench audit SERVER_RUN` (the serve run folder) names their waits"
    )


def wait_summary(
    sampled: dict[str, Any] | None,
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    order: list[str],
    pipeline_stages: list[str] | None = None,
) -> dict[str, Any] | None:
    """The ``waits`` object; None without rows or a measured request (module docstring)."""
    found = stage_samples(sampled, requests, stages, order, pipeline_stages)
    if found is None:
        return None
    mine, sets, tail, rows = found
    chosen = {k: mine[mine["request"].isin(ids)] for k, ids in sets.items()}
    by_set = {}  # set -> class -> sampled ms per request of the set
    for k, ids in sets.items():
        sums = chosen[k].groupby("cls")["dt_ns"].sum()
        by_set[k] = {
            sampled["classes"][int(c)]: ns_to_ms(float(v)) / len(ids) for c, v in sums.items()
        }
    others = rows[rows["in_stage"] == 0]
    causes = _causes(
        sampled, chosen[tail], chosen["median"], others, len(sets[tail]), len(sets["median"])
    )
    # another process holding the core is the noise badge's to say, not the pipeline's cause
    named = [c for c in causes if c["excess_ms_per_request"] > 0 and c["class"] != "off_cpu"]
    return {
        "tail_set": tail,
        "samples": {k: len(v) for k, v in chosen.items()},
        "cpu_source": sampled.get("cpu_source"),
        "classes": by_set,
        "causes": causes,
        "gc": gc_events(sampled),
        "headline": wait_headline(named[0], tail) if named else None,
    }


def stage_samples(
    sampled: dict[str, Any] | None,
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    order: list[str],
    pipeline_stages: list[str] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any], str, pd.DataFrame] | None:
    """``(rows, sets, tail set, all rows)``: the stage samples with ``request`` and ``stage`` (plus
    a ``gc`` row per collection overlap, ``stack`` -1), the tail attribution's request sets, the
    tail set's name and every sampled row; None without rows or a measured request."""
    if not sampled or not sampled["rows"]["t_ns"]:
        return None
    req, st = measured_ok(requests, stages)
    if req.empty:
        return None
    st = st[st["stage"].isin(pipeline_stages or order)]
    rows = pd.DataFrame(sampled["rows"])
    mine = _assigned(rows[rows["in_stage"] == 1], st)
    # a thread due and not yet in a stage (in_stage 2) counts in its late windows only
    if sampled.get("late_start"):
        late = late_windows(req, st)
        mine = pd.concat([mine, _assigned(rows[rows["in_stage"] == LATE_ROW], late)])
        st = pd.concat([st, late], ignore_index=True)
    mine = _with_collections(mine, sampled, st)
    sets = {
        k: v
        for k, v in request_sets(stage_matrix(requests, stages, order)).items()
        if v is not None
    }
    ones = int(mine["request"].isin(sets.get("slowest_1pct", ())).sum())
    return mine, sets, "slowest_1pct" if ones >= MIN_SAMPLES else "slowest_5pct", rows


def late_windows(req: pd.DataFrame, st: pd.DataFrame) -> pd.DataFrame:
    """Each request's due time to first stage (after the previous one's) as LATE_STAGE rows."""
    spans = st.assign(end_ns=st["start_ns"] + st["dur_ns"]).groupby("request")
    first, last = spans["start_ns"].min(), spans["end_ns"].max()
    due = req.set_index("request")["start_ns"].reindex(first.index)
    order = np.argsort(due.to_numpy(np.int64), kind="stable")
    ids = first.index.to_numpy()[order]
    before = np.maximum.accumulate(last.to_numpy(np.int64)[order])
    lo = np.maximum(
        due.to_numpy(np.int64)[order], np.concatenate([[np.iinfo(np.int64).min], before[:-1]])
    )
    gap = first.to_numpy(np.int64)[order] - lo
    open_ = gap > 0
    return pd.DataFrame(
        {"request": ids[open_], "stage": LATE_STAGE, "start_ns": lo[open_], "dur_ns": gap[open_]}
    )


def _assigned(rows: pd.DataFrame, st: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the ``request`` and ``stage`` whose interval holds each (others dropped)."""
    order, s, e = _by_start(st)
    t = rows["t_ns"].to_numpy(np.int64)
    pos = np.searchsorted(s, t, side="right") - 1
    ok = (pos >= 0) & (t < e[np.maximum(pos, 0)]) if len(s) else np.zeros(len(t), dtype=bool)
    out = rows[ok].copy()
    out["request"] = st["request"].to_numpy(np.int64)[order][pos[ok]]
    out["stage"] = st["stage"].to_numpy(object)[order][pos[ok]]
    return out


def _by_start(st: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stage rows' order by start, and their starts and ends in that order."""
    order = np.argsort(st["start_ns"].to_numpy(np.int64), kind="stable")
    s = st["start_ns"].to_numpy(np.int64)[order]
    return order, s, s + st["dur_ns"].to_numpy(np.int64)[order]


def _with_collections(mine: pd.DataFrame, sampled, st: pd.DataFrame) -> pd.DataFrame:
    """Each collection's overlap with each stage call as a ``gc`` row (``t_ns`` -1)."""
    events = sampled.get("gc") or {}
    gc_code = sampled["classes"].index("gc")
    mine = mine.assign(dt_ns=mine["dt_ns"].where(mine["cls"] != gc_code, 0))
    if not events.get("dur_ns") or st.empty:
        return mine
    order, s, e = _by_start(st)
    longest = int((e - s).max())
    found = []
    for start, dur in zip(events["start_ns"], events["dur_ns"]):
        lo, hi = np.searchsorted(s, [start - longest, start + dur])
        overlap = np.minimum(e[lo:hi], start + dur) - np.maximum(s[lo:hi], start)
        for k in np.flatnonzero(overlap > 0):
            found.append((lo + k, int(overlap[k])))
    if not found:
        return mine
    at = np.array([k for k, _ in found])
    extra = pd.DataFrame(
        {
            "t_ns": -1,
            "dt_ns": [ns for _, ns in found],
            "cls": gc_code,
            "stack": -1,
            "site": -1,
            "request": st["request"].to_numpy(np.int64)[order][at],
            "stage": st["stage"].to_numpy(object)[order][at],
        }
    )
    return pd.concat([mine, extra], ignore_index=True)


def _causes(sampled, tail, median, others, n_tail: int, n_median: int) -> list[dict[str, Any]]:
    classes = sampled["classes"]
    total = float(tail["dt_ns"].sum())
    out = []
    for (stage, code), group in tail[tail["cls"] != 0].groupby(["stage", "cls"]):
        wait_ns = float(group["dt_ns"].sum())
        in_median = median[(median["stage"] == stage) & (median["cls"] == code)]
        median_ms = ns_to_ms(float(in_median["dt_ns"].sum())) / n_median if n_median else None
        lines: Counter = Counter()  # ``record (app.py:83)``: the waiting line most time was at
        for stack, site, dt in zip(group["stack"], group["site"], group["dt_ns"]):
            if site >= 0 and stack >= 0:
                lines[_frame(sampled, int(stack), int(site))] += int(dt)
        out.append(
            {
                "class": classes[int(code)],
                "stage": stage,
                "share": wait_ns / total if total else 0.0,
                "ms_per_request": ns_to_ms(wait_ns) / n_tail,
                "median_ms_per_request": median_ms,
                "excess_ms_per_request": ns_to_ms(wait_ns) / n_tail - (median_ms or 0.0),
                # before the first stage the thread runs the harness (pacer, timer): no line of yours
                "site": call_site(*lines.most_common(1)[0][0])
                if lines and stage != LATE_STAGE
                else None,
                "meanwhile": _meanwhile(
                    sampled, others[others["t_ns"].isin(group["t_ns"])], n_tail
                ),
            }
        )
    return sorted(out, key=lambda c: (-c["excess_ms_per_request"], c["stage"], c["class"]))


def _frame(sampled, stack: int, k: int) -> tuple[str, str, int]:
    return tuple(sampled["frames"][sampled["stacks"][stack][k]])


def _meanwhile(sampled, others: pd.DataFrame, n_tail: int) -> list[dict[str, Any]]:
    """The other threads on CPU at the waits' samples: the user's code first, most CPU first."""
    cpu: Counter = Counter()
    for thread, stack, ns in zip(others["thread"], others["stack"], others["cpu_ns"]):
        if ns > 0:
            own = any(is_user_file(sampled["frames"][f][0]) for f in sampled["stacks"][int(stack)])
            key = (own, sampled["threads"][int(thread)], hottest_frame(sampled, int(stack)))
            cpu[key] += int(ns)
    ranked = sorted(cpu.items(), key=lambda kv: (not kv[0][0], -kv[1]))
    return [
        {"thread": thread, "frame": frame, "cpu_ms_per_request": ns_to_ms(ns) / n_tail}
        for (_, thread, frame), ns in ranked[:MAX_MEANWHILE]
    ]


def hottest_frame(sampled, stack: int) -> str:
    """``copy deepcopy <- snapshot_forever (app.py:45)``: the library frame the user's deepest
    frame called (``spin (app.py:12)`` when the user's frame is the top)."""
    frames = [_frame(sampled, stack, k) for k in range(len(sampled["stacks"][stack]))]
    own = [k for k, f in enumerate(frames) if is_user_file(f[0])]
    if not own:
        return frame_name(*frames[-1][:2])
    k = own[-1]
    if k == len(frames) - 1:
        return call_site(*frames[k])
    return f"{frame_name(*frames[k + 1][:2])} <- {call_site(*frames[k])}"


def gc_events(sampled) -> dict[str, Any] | None:
    """The timing run's collections: count, pause time, by generation and by thread."""
    events = sampled.get("gc") or {}
    if not events.get("dur_ns"):
        return None
    dur = events["dur_ns"]
    gens: dict[str, dict[str, Any]] = {}
    threads: Counter = Counter()
    for ns, gen, thread in zip(dur, events["generation"], events["thread"]):
        g = gens.setdefault(str(gen), {"collections": 0, "pause_ms_total": 0.0})
        g["collections"] += 1
        g["pause_ms_total"] += ns_to_ms(ns)
        threads[sampled["threads"][thread]] += ns
    return {
        "collections": len(dur),
        "pause_ms_total": ns_to_ms(sum(dur)),
        "pause_ms_max": ns_to_ms(max(dur)),
        "generations": dict(sorted(gens.items())),
        "threads": {name: ns_to_ms(ns) for name, ns in threads.most_common()},
    }


def wait_headline(cause: dict[str, Any], tail_set: str) -> str:
    """``record: 93 % of the slowest 1 % waiting on a lock at record (app.py:83); ...``."""
    label = "1 %" if tail_set == "slowest_1pct" else "5 %"
    at = f" at {cause['site']}" if cause["site"] else ""
    text = (
        f"{cause['stage']}: {100 * cause['share']:.0f} % of the slowest {label} "
        f"{WAIT_WORDS[cause['class']]}{at}"
    )
    if cause["meanwhile"]:
        m = cause["meanwhile"][0]
        text += (
            f"; meanwhile thread '{m['thread']}' ran {m['frame']} for "
            f"{m['cpu_ms_per_request']:.3g} ms per slow request"
        )
    return text


def wait_flames(
    sampled: dict[str, Any] | None,
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    order: list[str],
    pipeline_stages: list[str] | None = None,
) -> dict[str, Any] | None:
    """The slow requests' work (``cpu`` samples: ``stage -> frames``) beside their waits (``stage ->
    class -> frames``) for :mod:`workbench.plots.flame`; None without rows or a measured request.

    ``work`` and ``waits``: depth-first nodes (``parent`` -1: root; ``tail_ns``, ``median_ns``:
    inclusive sampled ns per set), each with :data:`MIN_NODE_SHARE` of the tree's tail time."""
    found = stage_samples(sampled, requests, stages, order, pipeline_stages)
    if found is None:
        return None
    rows, sets, tail, _ = found
    names = [frame_name(file, function) for file, function, _ in sampled["frames"]]  # by frame id
    paths = [tuple(names[f] for f in stack) for stack in sampled["stacks"]]
    sums: dict[str, dict[tuple, list[int]]] = {tree: {} for tree in ("work", "waits")}
    for k, ids in enumerate((sets[tail], sets["median"])):
        chosen = rows[rows["request"].isin(ids)]
        for stage, cls, stack, ns in zip(
            chosen["stage"], chosen["cls"], chosen["stack"], chosen["dt_ns"]
        ):
            frames = paths[int(stack)] if stack >= 0 else ()
            tree = "work" if cls == 0 else "waits"
            head = (("stage", stage),) if cls == 0 else (("stage", stage), ("class", cls))
            path = head + tuple(("frame", f) for f in frames)
            for depth in range(1, len(path) + 1):
                sums[tree].setdefault(path[:depth], [0, 0])[k] += int(ns)
    return {
        "tail_set": tail,
        "requests": {"tail": len(sets[tail]), "median": len(sets["median"])},
        **{tree: _nodes(paths_ns, sampled["classes"]) for tree, paths_ns in sums.items()},
    }


def _nodes(sums: dict[tuple, list[int]], classes: list[str]) -> list[dict[str, Any]]:
    """Depth-first nodes of ``sums`` (path -> [tail ns, median ns]) with enough tail time."""
    total = sum(v[0] for p, v in sums.items() if len(p) == 1)
    keep = [p for p, v in sums.items() if total and v[0] >= MIN_NODE_SHARE * total]

    def row(path: tuple) -> dict[str, Any]:
        kind, name = path[-1]
        name = classes[int(name)] if kind == "class" else name
        return {"name": name, "kind": kind, "tail_ns": sums[path][0], "median_ns": sums[path][1]}

    # depth first with the most tail time first among siblings: by each prefix's (-tail ns, path)
    return tree_rows(keep, lambda p: [(-sums[p[:i]][0], p[:i]) for i in range(1, len(p) + 1)], row)
