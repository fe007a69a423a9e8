"""The measured requests as one wide table, a row per request, a column per stage (ns): every
per-request view starts from it, so it lives below all of them."""

from __future__ import annotations

import numpy as np
import pandas as pd

END_TO_END = "end_to_end"
UNATTRIBUTED = "unattributed"


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
    """:func:`stage_matrix`'s pivot by index arithmetic, O(n log n), when every (request, stage)
    has at most one row and ``column`` is int64; None otherwise. Same table as ``pivot_table`` then
    ``reindex`` (int64 where complete, else float64 with NaN); other requests' rows are dropped as
    numbers (copying the texts took longer than the rest)."""
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
