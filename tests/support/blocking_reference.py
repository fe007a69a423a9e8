"""The head-of-line blame as it was before issue 35: every wait split over every stage interval it
overlaps, cut by cut (quadratic when waits are long). Kept, slow and obvious, as the reference that
:func:`workbench.analysis.blocking.head_of_line` is tested against on random runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workbench.analysis.blocking import LOAD_COLUMNS, TOP_HOLDERS, batch_table, executing_stages
from workbench.analysis.blocking import waits as wait_table
from workbench.analysis.tail import measured_ok


def head_of_line(requests: pd.DataFrame, stages: pd.DataFrame) -> dict[str, Any] | None:
    """The ``head_of_line`` object, wait by wait and cut by cut."""
    if any(c not in requests.columns for c in LOAD_COLUMNS) or "start_ns" not in stages.columns:
        return None
    req, st = measured_ok(requests, stages)
    batches = batch_table(req)
    spans = Spans(executing_stages(req, st))
    blamed: dict[str, float] = {}
    by_holder: dict[tuple[int, str], float] = {}
    idle = 0.0
    waiting = wait_table(req)
    columns = (waiting[c].tolist() for c in ("batch", "lo_ns", "hi_ns", "size"))
    for batch, lo, hi, size in zip(*columns):
        part, gap = spans.blame(int(lo), int(hi), int(batch))
        idle += gap * size
        for (holder, stage), ns in part.items():
            blamed[stage] = blamed.get(stage, 0.0) + ns * size
            by_holder[(holder, stage)] = by_holder.get((holder, stage), 0.0) + ns * size
    queue_ns = int(req["queue_wait_ns"].sum())
    wait_ns = queue_ns + int(req["batch_wait_ns"].sum())
    top = max(blamed, key=lambda s: (blamed[s], s)) if blamed else None
    members = dict(zip(batches["batch"], batches["requests"]))
    holders = sorted(by_holder.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_HOLDERS]
    return {
        "waiting_requests": int((req["queue_wait_ns"] > 0).sum()),
        "queue_wait_ns": queue_ns,
        "batch_wait_ns": wait_ns - queue_ns,
        "blamed_ns": {s: int(round(v)) for s, v in blamed.items()},
        "idle_ns": int(round(idle)),
        "share_of_queue_wait": {s: v / queue_ns for s, v in blamed.items()} if queue_ns else {},
        "share_of_wait": {s: v / wait_ns for s, v in blamed.items()} if wait_ns else {},
        "stage": top,
        "holders": [
            {
                "batch": int(b),
                "requests": [int(r) for r in members.get(b, [])],
                "stage": s,
                "blocked_ns": int(round(ns)),
            }
            for (b, s), ns in holders
        ],
    }


class Spans:
    """The executing stage intervals, sorted by start, for :meth:`blame`."""

    def __init__(self, intervals: pd.DataFrame):
        ordered = intervals.sort_values(["start_ns", "end_ns"], kind="stable")
        self.start = ordered["start_ns"].to_numpy(np.int64)
        self.end = ordered["end_ns"].to_numpy(np.int64)
        self.batch = ordered["batch"].to_numpy(np.int64)
        self.stage = ordered["stage"].to_numpy(object)
        self.longest = int((self.end - self.start).max()) if len(ordered) else 0

    def blame(self, lo: int, hi: int, waiting: int) -> tuple[dict[tuple[int, str], float], float]:
        """Split the wait [lo, hi) between the stage intervals overlapping it (evenly among those running
        at each instant); the rest is idle. Returns ({(batch, stage): ns}, idle ns)."""
        first = int(np.searchsorted(self.start, lo - self.longest, side="left"))
        last = int(np.searchsorted(self.start, hi, side="left"))
        k = np.arange(first, last)
        k = k[(self.end[k] > lo) & (self.batch[k] != waiting)]
        if k.size == 0:
            return {}, float(hi - lo)
        starts, ends = np.clip(self.start[k], lo, hi), np.clip(self.end[k], lo, hi)
        cuts = np.unique(np.concatenate([[lo, hi], starts, ends]))
        part: dict[tuple[int, str], float] = {}
        idle = 0.0
        for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            running = k[(starts <= a) & (ends >= b)]
            if running.size == 0:
                idle += float(b - a)
                continue
            for j in running.tolist():
                key = (int(self.batch[j]), str(self.stage[j]))
                part[key] = part.get(key, 0.0) + float(b - a) / running.size
        return part, idle


EXECUTING = ("hydrate", "forward", "post")


def random_load_tables(seed: int, grid: int, batches: int = 8) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A random load run's requests and stages, every time a multiple of ``grid`` ns.

    Up to ``batches`` batches (ids drawn with gaps) of 1-3 requests plus undispatched ones
    (batch -1); some warm-up or failed; waits drawn apart from the stage rows, so a batch's own
    stages sometimes run during its wait. Each request has up to 2 executing stages (anywhere,
    overlapping, zero-length) and a ``queue_wait`` row, so at most 2 x ``batches`` intervals run
    at once: with ``grid`` a multiple of lcm(1..16) = 720720 every piece of a wait divides evenly.
    """
    rng = np.random.default_rng(seed)
    req, st = [], []
    for b in [*rng.permutation(batches + 2)[:batches].tolist(), -1]:
        for _ in range(int(rng.integers(1, 4))):
            arrival, batch_wait, queue_wait = (int(rng.integers(0, n)) * grid for n in (60, 8, 30))
            rid = len(req)
            req.append(
                {
                    "request": rid,
                    "warmup": bool(rng.random() < 0.1),
                    "ok": bool(rng.random() < 0.9),
                    "dur_ns": 0,
                    "arrival_ns": arrival,
                    "batch_wait_ns": batch_wait,
                    "queue_wait_ns": queue_wait * int(rng.random() < 0.8),
                    "service_ns": 5 * grid,
                    "batch": b,
                }
            )
            names = rng.choice([*EXECUTING, "queue_wait"], size=3, replace=False).tolist()
            executing = [n for n in names if n in EXECUTING][:2]
            for name in [n for n in names if n not in EXECUTING or n in executing]:
                start, dur = int(rng.integers(0, 90)) * grid, int(rng.integers(0, 25)) * grid
                st.append({"request": rid, "stage": name, "start_ns": start, "dur_ns": dur})
    stages = pd.DataFrame(st).sample(frac=1.0, random_state=seed).reset_index(drop=True)
    return pd.DataFrame(req), stages.assign(device_dur_ns=pd.NA)
