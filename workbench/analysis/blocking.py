"""Head-of-line blocking: which stage, of which batches, held the executor while closed batches waited.

Input: a load or served run's tables, requests with the load columns and stage rows with real
start times on the same clock. A request waits for an executor from the end of its batch wait
(``arrival + batch_wait``) for its ``queue_wait``; each instant of that wait is blamed evenly on the
stages of the batches executing then, or on nothing (the dispatch gap). Waits count once per
waiting request, as the budget does. Out: ``head_of_line`` (HOL in docs/json.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..record.tables import LOAD_REQUEST_COLUMNS
from .tail import measured_ok

LOAD_COLUMNS = tuple(LOAD_REQUEST_COLUMNS)
NOT_EXECUTING = ("ingress", "batch_wait", "queue_wait", "egress", "network")
TOP_HOLDERS = 5


def batch_table(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per dispatched batch by start: batch, close_ns, start_ns, end_ns, size, requests."""
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
    """The queue waits: one row per distinct (batch, lo_ns, hi_ns) with ``size`` requests."""
    req = requests[(requests["batch"] >= 0) & (requests["queue_wait_ns"] > 0)]
    lo = req["arrival_ns"] + req["batch_wait_ns"]
    rows = pd.DataFrame({"batch": req["batch"], "lo_ns": lo, "hi_ns": lo + req["queue_wait_ns"]})
    return rows.groupby(["batch", "lo_ns", "hi_ns"], sort=True).size().rename("size").reset_index()


def executing_stages(requests: pd.DataFrame, stages: pd.DataFrame) -> pd.DataFrame:
    """Per batch, its executing stages' intervals (one request's rows speak for the batch)."""
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
    spans = executing_stages(req, st).sort_values(["start_ns", "end_ns"], kind="stable")
    spans = spans.reset_index(drop=True)
    waiting = waits(req)
    blame = _Blame(spans, waiting)
    queue_ns = int(req["queue_wait_ns"].sum())
    wait_ns = queue_ns + int(req["batch_wait_ns"].sum())
    keyed = spans.assign(whole=blame.whole, frac=blame.frac)[blame.hit]
    keyed = keyed.groupby(["batch", "stage"], sort=False)[["whole", "frac"]].sum().reset_index()
    by_stage = keyed.groupby("stage")[["whole", "frac"]].sum()
    blamed = {
        s: int(by_stage.at[s, "whole"]) + float(by_stage.at[s, "frac"]) for s in blame.order()
    }
    top = max(blamed, key=lambda s: (blamed[s], s)) if blamed else None
    keyed["value"] = keyed["whole"] + keyed["frac"]
    keyed["minus"] = -keyed["value"]
    holders = keyed.sort_values(["minus", "batch", "stage"], kind="stable").head(TOP_HOLDERS)
    members = req[req["batch"].isin(holders["batch"])].groupby("batch")["request"].agg(list)
    return {
        "waiting_requests": int((req["queue_wait_ns"] > 0).sum()),
        "queue_wait_ns": queue_ns,
        "batch_wait_ns": wait_ns - queue_ns,
        "blamed_ns": {s: int(round(v)) for s, v in blamed.items()},
        "idle_ns": int(round(blame.idle)),
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
            for b, s, ns in zip(holders["batch"], holders["stage"], holders["value"])
        ],
    }


def split(lo, hi, size, start, end) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The waits ``[lo, hi)`` (``size`` requests each) split evenly between the intervals ``[start,
    end)`` running at each instant, in one O(n log n) sweep: per interval its blame as an exact
    int64 ``whole`` and a float ``frac``, whether it got any (``hit``); the ``idle`` wait (ns)."""
    points = np.unique(np.concatenate([lo, hi, start, end]))
    up, down = np.searchsorted(points, start), np.searchsorted(points, end)
    n = len(points)
    cover = np.cumsum(np.bincount(up, minlength=n) - np.bincount(down, minlength=n))[:-1]
    opened = np.bincount(np.searchsorted(points, lo), size, n)
    closed = np.bincount(np.searchsorted(points, hi), size, n)
    mass = np.cumsum((opened - closed).astype(np.int64))[:-1] * np.diff(points)
    busy = cover > 0
    whole, rest = np.divmod(np.where(busy, mass, 0), np.where(busy, cover, 1))
    sums = [
        np.concatenate([[0], np.cumsum(column)])
        for column in (whole, rest / np.where(busy, cover, 1), busy & (mass > 0))
    ]
    whole, frac, hit = (column[down] - column[up] for column in sums)
    return whole, frac, hit > 0, int(mass[~busy].sum())


class _Blame:
    """Each executing interval's share of the waits and the ``idle`` wait, never of its own batch's."""

    def __init__(self, spans: pd.DataFrame, waiting: pd.DataFrame):
        self.spans, self.waiting = spans, waiting
        self.start = spans["start_ns"].to_numpy(np.int64)
        self.end = spans["end_ns"].to_numpy(np.int64)
        self.batch = spans["batch"].to_numpy(np.int64)
        self.longest = int((self.end - self.start).max()) if len(spans) else 0
        self.own = _overlaps_own(waiting, spans)
        clean = waiting[~self.own]
        columns = (clean[c].to_numpy(np.int64) for c in ("lo_ns", "hi_ns", "size"))
        self.whole, self.frac, self.hit, idle = split(*columns, self.start, self.end)
        self.idle = float(idle)
        self.first_alone: dict[str, int] = {}  # stage -> the first wait split alone that blamed it
        for i in np.flatnonzero(self.own).tolist():
            self._alone(i)

    def _alone(self, i: int) -> None:
        batch, lo, hi, size = (
            int(self.waiting[c].iat[i]) for c in ("batch", "lo_ns", "hi_ns", "size")
        )
        # the intervals starting before hi, from the first that can still run at lo (sorted by start)
        k = np.arange(*np.searchsorted(self.start, [lo - self.longest, hi], side="left"))
        k = k[(self.end[k] > lo) & (self.batch[k] != batch)]
        whole, frac, hit, idle = split([lo], [hi], [1], self.start[k], self.end[k])
        self.whole[k] += whole * size
        self.frac[k] += frac * size
        self.hit[k] |= hit
        self.idle += idle * size
        for stage in self.spans["stage"].to_numpy()[k[hit]]:
            self.first_alone.setdefault(stage, i)

    def order(self) -> list[str]:
        """The blamed stages in the order a wait-by-wait split first meets them."""
        first = {}
        for stage in pd.unique(self.spans["stage"].to_numpy()[self.hit]):
            i = min(self._first_clean(stage), self.first_alone.get(stage, len(self.waiting)))
            # within wait i: the first instant a ``stage`` interval runs, and that interval
            batch, lo, hi = (int(self.waiting[c].iat[i]) for c in ("batch", "lo_ns", "hi_ns"))
            runs = (self.spans["stage"].to_numpy() == stage) & (self.batch != batch)
            runs &= (self.start < hi) & (self.end > lo) & (self.end > self.start)
            instant = int(np.maximum(self.start[runs], lo).min())
            at = int(np.argmax(runs & (self.start <= instant) & (self.end > instant)))
            first[stage] = (i, instant, at)
        return sorted(first, key=first.get)

    def _first_clean(self, stage: str) -> int:
        """The first wait of the sweep that overlaps one of ``stage`` 's intervals."""
        k = np.flatnonzero((self.spans["stage"].to_numpy() == stage) & (self.end > self.start))
        reach = np.maximum.accumulate(self.end[k])  # spans sorted by start: the latest end so far
        lo, hi = (self.waiting[c].to_numpy(np.int64) for c in ("lo_ns", "hi_ns"))
        before = np.searchsorted(self.start[k], hi, side="left")
        met = (before > 0) & (reach[np.maximum(before, 1) - 1] > lo) & ~self.own
        return int(np.argmax(met)) if met.any() else len(self.waiting)


def _overlaps_own(waiting: pd.DataFrame, spans: pd.DataFrame) -> np.ndarray:
    """Per wait, whether one of its own batch's intervals runs during it."""
    pairs = waiting[["batch", "lo_ns", "hi_ns"]].reset_index().merge(spans, on="batch")
    hit = (pairs["start_ns"] < pairs["hi_ns"]) & (pairs["end_ns"] > pairs["lo_ns"])
    hit &= pairs["end_ns"] > pairs["start_ns"]
    return np.isin(np.arange(len(waiting)), pairs["index"][hit].to_numpy())
