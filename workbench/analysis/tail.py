"""Tail attribution: which stages the slowest requests spend their time in (TAIL in docs/json.md);
successful measured requests, ties broken by request number so a set is deterministic. It starts
from :func:`stage_matrix`, the measured requests as one wide table (a row per request, a column per
stage, ns), which every per-request view reads."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..units import ns_to_ms
from .stats import percentiles

END_TO_END = "end_to_end"
UNATTRIBUTED = "unattributed"
MIN_REQUESTS_FOR_1PCT = 200
TAIL_FRACTIONS = {"slowest_1pct": 0.01, "slowest_5pct": 0.05}
MEDIAN_BAND = (40, 60)


def measured_ok(requests: pd.DataFrame, stages: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The measured successful requests and their stage rows."""
    req = measured_requests(requests)
    return req, stages[stages["request"].isin(req["request"])]


def measured_requests(requests: pd.DataFrame) -> pd.DataFrame:
    """The measured (not warm-up) requests that succeeded."""
    return requests[~requests["warmup"].astype(bool) & requests["ok"].astype(bool)]


def stage_matrix(
    requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str], column: str = "dur_ns"
) -> pd.DataFrame:
    """Wide table: one row per measured successful request, one column per stage (ns), then
    ``end_to_end`` and ``unattributed``. ``column``: host (``dur_ns``) or device (``device_dur_ns``)
    time; for device time end to end is the stage sum."""
    req = measured_requests(requests)
    wide = _one_row_per_cell(req, stages, stage_order, column)
    if wide is None:  # a stage run twice in a request, or a nullable column: pandas sums the cells
        st = stages[stages["request"].isin(req["request"])]
        wide = st.pivot_table(index="request", columns="stage", values=column, aggfunc="sum")
        wide = wide.reindex(index=req["request"].to_numpy(), columns=stage_order)
    if column == "dur_ns":
        e2e = req.set_index("request")["dur_ns"].reindex(wide.index)
    else:
        e2e = wide.sum(axis=1, min_count=1)
    wide[END_TO_END] = e2e
    wide[UNATTRIBUTED] = e2e - wide[stage_order].sum(axis=1, min_count=1)
    return wide


def _one_row_per_cell(
    req: pd.DataFrame, st: pd.DataFrame, stage_order: list[str], column: str
) -> pd.DataFrame | None:
    """:func:`stage_matrix`'s pivot in O(n log n) when each cell has one int64 row at most."""
    ids = req["request"].to_numpy()
    if st[column].dtype != np.int64 or not pd.Index(ids).is_unique:
        return None
    rows = pd.Index(ids).get_indexer(st["request"].to_numpy())
    kept = rows >= 0
    codes, names = pd.factorize(st["stage"].to_numpy())  # hashes each text once, not per stage
    cols = pd.Index(stage_order).get_indexer(names)[codes]
    if (((codes < 0) | (cols < 0)) & kept).any():
        return None
    del codes  # an array a stage row is 48 MB at 1,000,000 requests: few at a time, reused in place
    cell = rows
    cell *= len(stage_order)
    cell += cols
    del cols
    cell = cell[kept]
    if not pd.Index(cell).is_unique:
        return None
    ran = np.zeros(len(ids) * len(stage_order), bool)
    ran[cell] = True
    ran = ran.reshape(len(ids), len(stage_order))
    stages_ran, requests_ran = ran.any(axis=0), ran.any(axis=1)
    full = ran[requests_ran][:, stages_ran].all() and requests_ran.all()
    values = np.zeros(ran.size, np.int64 if full else np.float64)
    values[cell] = st[column].to_numpy()[kept]
    values = values.reshape(ran.shape)
    if not full:
        values[~ran] = np.nan
    wide = pd.DataFrame(values, index=pd.Index(ids, name="request"), columns=stage_order)
    for name in np.asarray(stage_order, dtype=object)[~stages_ran]:
        wide[name] = np.nan
    wide.columns.name = "stage"
    return wide


def slowest(e2e_ns: pd.Series, fraction: float) -> pd.Index:
    """Request ids of the ceil(fraction * n) largest end-to-end times (ties: lower request id first)."""
    k = math.ceil(fraction * len(e2e_ns))
    order = e2e_ns.reset_index().sort_values(
        [e2e_ns.name or 0, "request"], ascending=[False, True], kind="stable"
    )
    return pd.Index(order["request"].iloc[:k])


def median_set(e2e_ns: pd.Series, band: tuple[float, float] = MEDIAN_BAND) -> pd.Index:
    """Request ids whose end to end lies between the band's percentiles (inclusive); when the band
    falls between two order statistics, the one or two middle requests: never empty."""
    values = e2e_ns.to_numpy(dtype=np.int64)
    if values.size == 0:
        return e2e_ns.index[:0]
    lo, hi = percentiles(values, band)
    inside = (e2e_ns >= lo) & (e2e_ns <= hi)
    if not inside.any():
        ordered = np.sort(values)
        lo, hi = ordered[(values.size - 1) // 2], ordered[values.size // 2]
        inside = (e2e_ns >= lo) & (e2e_ns <= hi)
    return e2e_ns.index[inside]


def request_sets(wide: pd.DataFrame) -> dict[str, pd.Index | None]:
    """Request ids of the slowest 1 % (None under :data:`MIN_REQUESTS_FOR_1PCT`), the slowest
    5 % and the median set, from a :func:`stage_matrix`."""
    e2e = wide[END_TO_END].astype("int64").rename("e2e_ns").rename_axis("request")
    enough = len(e2e) >= MIN_REQUESTS_FOR_1PCT
    sets = {
        name: slowest(e2e, fraction) if enough or name != "slowest_1pct" else None
        for name, fraction in TAIL_FRACTIONS.items()
    }
    return sets | {"median": median_set(e2e)}


def shares(wide: pd.DataFrame, ids: pd.Index, stage_order: list[str]) -> dict[str, float]:
    """Stage (and ``unattributed``) -> sum of its time over ``ids`` / sum of their end to end."""
    rows = wide.loc[ids]
    total = float(rows[END_TO_END].sum())
    names = [*stage_order, UNATTRIBUTED]
    return {name: float(rows[name].fillna(0).sum()) / total if total else 0.0 for name in names}


def tail_attribution(
    requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str]
) -> dict[str, Any]:
    """The ``tail`` object of ``show --json``: ``{"requests", "sets": {name: {"count", "e2e_sum_ms",
    "shares"} or None}, "stages": [{"name", "share_<set>"...}], "notes", "headline"}``; shares are
    fractions in [0, 1]."""
    wide = stage_matrix(requests, stages, stage_order)
    n = len(wide)
    notes: list[str] = []
    if n == 0:
        note = "no successful measured request"
        return {"requests": 0, "sets": {}, "stages": [], "notes": [note], "headline": None}
    ids = request_sets(wide)
    if ids["slowest_1pct"] is None:
        notes.append(
            f"slowest 1 % omitted: {n} requests; it needs at least {MIN_REQUESTS_FOR_1PCT} "
            f"(with fewer it is {math.ceil(0.01 * n)} request(s), not a tail)"
        )
    sets = {k: None if v is None else _set_entry(wide, v, stage_order) for k, v in ids.items()}
    rows = [
        {"name": s} | {f"share_{k}": None if v is None else v["shares"][s] for k, v in sets.items()}
        for s in [*stage_order, UNATTRIBUTED]
    ]
    return {
        "requests": n,
        "sets": sets,
        "stages": rows,
        "notes": notes,
        "headline": headline(sets, stage_order),
    }


def _set_entry(wide: pd.DataFrame, ids: pd.Index, stage_order: list[str]) -> dict[str, Any]:
    return {
        "count": int(len(ids)),
        "e2e_sum_ms": ns_to_ms(float(wide.loc[ids, END_TO_END].sum())),
        "shares": shares(wide, ids, stage_order),
    }


def headline(sets: dict[str, Any], stage_order: list[str]) -> str | None:
    """One sentence: the stage holding most of the tail, against its share in the median request."""
    tail_name = "slowest_1pct" if sets.get("slowest_1pct") else "slowest_5pct"
    tail, median = sets.get(tail_name), sets.get("median")
    if not tail or not median:
        return None
    top = max(stage_order or [UNATTRIBUTED], key=lambda s: tail["shares"].get(s, 0.0))
    label = "1 %" if tail_name == "slowest_1pct" else "5 %"
    return (
        f"in the slowest {label}, {top} holds {tail['shares'][top]:.0%} of the time; "
        f"in the median request, {median['shares'][top]:.0%}"
    )
