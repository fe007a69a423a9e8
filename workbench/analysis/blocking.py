"""Head-of-line blocking: which stage, of which batches, held the executor while closed batches waited.

Input: a load or served (server side) run's tables, whose requests carry the
load columns (``arrival_ns``, ``batch_wait_ns``, ``queue_wait_ns``,
``service_ns``, ``batch``) and whose stage rows carry real start times on the
same clock. A request waits for an executor from the end of its batch
wait (``arrival + batch_wait``: its batch closed, or was due) for its
``queue_wait``. Each instant
of that wait is blamed on the stages of the batches executing at that instant,
split evenly between them (with several executors all busy, each holds an
equal part); an instant when no batch executes is the dispatch gap (wake-up and
hand-off), blamed on nothing. Waits count once per waiting request, as the
budget does: a batch of 8 that waits 10 ms is 80 ms of request wait.

Out (``head_of_line``)::

    {"waiting_requests": int, "queue_wait_ns": int, "batch_wait_ns": int,
     "blamed_ns": {stage: int}, "idle_ns": int,
     "share_of_queue_wait": {stage: float}, "share_of_wait": {stage: float},
     "stage": str | None, "holders": [{"batch", "requests", "stage", "blocked_ns"}]}

``share_of_wait`` divides by batch wait plus queue wait (all the waiting a
request does before its batch runs); ``holders`` are the :data:`TOP_HOLDERS`
(5) batches whose ``stage`` blocked the most, with their request ids.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..record.tables import LOAD_REQUEST_COLUMNS
from .matrix import measured_ok

LOAD_COLUMNS = tuple(LOAD_REQUEST_COLUMNS)
NOT_EXECUTING = ("ingress", "batch_wait", "queue_wait", "egress", "network")
TOP_HOLDERS = 5


def batch_table(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per dispatched batch: ``batch``, ``close_ns``, ``start_ns``, ``end_ns``, ``size`` (measured
    requests in it), ``requests`` (their ids), sorted by start."""
    req = requests[requests["batch"] >= 0]
    close = req["arrival_ns"] + req["batch_wait_ns"]
    start = close + req["queue_wait_ns"]
    rows = pd.DataFrame(
        {
            "batch": req["batch"],
            "close_ns": close,
            "start_ns": start,
            "end_ns": start + req["service_ns"],
            "request": req["request"],
        }
    )
    grouped = rows.groupby("batch", sort=True)
    out = grouped.agg(
        close_ns=("close_ns", "min"),
        start_ns=("start_ns", "min"),
        end_ns=("end_ns", "max"),
        size=("request", "size"),
    ).reset_index()
    out["requests"] = grouped["request"].agg(list).to_numpy()
    return out.sort_values(["start_ns", "batch"], kind="stable").reset_index(drop=True)


def waits(requests: pd.DataFrame) -> pd.DataFrame:
    """The queue waits of the dispatched requests, one row per distinct (``batch``, ``lo_ns``, ``hi_ns``) with
    ``size`` requests: a request waits for the executor from the end of its batch wait to its start (a
    request that arrived after its batch was due has no batch wait, only queue wait)."""
    req = requests[(requests["batch"] >= 0) & (requests["queue_wait_ns"] > 0)]
    lo = req["arrival_ns"] + req["batch_wait_ns"]
    rows = pd.DataFrame({"batch": req["batch"], "lo_ns": lo, "hi_ns": lo + req["queue_wait_ns"]})
    return rows.groupby(["batch", "lo_ns", "hi_ns"], sort=True).size().rename("size").reset_index()


def executing_stages(requests: pd.DataFrame, stages: pd.DataFrame) -> pd.DataFrame:
    """Per batch, the intervals of its executing stages (one request's rows speak for the batch):
    ``batch``, ``stage``, ``start_ns``, ``end_ns``."""
    first = requests[requests["batch"] >= 0].groupby("batch", sort=True)["request"].min()
    rows = stages[stages["request"].isin(first.to_numpy()) & ~stages["stage"].isin(NOT_EXECUTING)]
    batch_of = pd.Series(first.index.to_numpy(), index=first.to_numpy())
    return pd.DataFrame(
        {
            "batch": batch_of.reindex(rows["request"].to_numpy()).to_numpy(),
            "stage": rows["stage"].to_numpy(),
            "start_ns": rows["start_ns"].to_numpy(np.int64),
            "end_ns": (rows["start_ns"] + rows["dur_ns"]).to_numpy(np.int64),
        }
    )


def head_of_line(requests: pd.DataFrame, stages: pd.DataFrame) -> dict[str, Any] | None:
    """The ``head_of_line`` object (module docstring); None when the run has no load columns."""
    if any(c not in requests.columns for c in LOAD_COLUMNS) or "start_ns" not in stages.columns:
        return None
    req, st = measured_ok(requests, stages)
    batches = batch_table(req)
    spans = _Spans(executing_stages(req, st))
    blamed: dict[str, float] = {}
    by_holder: dict[tuple[int, str], float] = {}
    idle = 0.0
    waiting = waits(req)
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


class _Spans:
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
