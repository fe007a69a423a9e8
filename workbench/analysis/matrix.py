"""The measured requests as one wide table: a row per request, a column per stage (ns).

Every per-request view (budget, tail attribution, attribute effects, GC pauses)
starts from this table, so it lives below all of them: they import it, it
imports none of them.
"""

from __future__ import annotations

import pandas as pd

END_TO_END = "end_to_end"
UNATTRIBUTED = "unattributed"


def measured_ok(requests: pd.DataFrame, stages: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows of the measured (not warm-up) requests that succeeded."""
    req = requests[~requests["warmup"].astype(bool) & requests["ok"].astype(bool)]
    return req, stages[stages["request"].isin(req["request"])]


def stage_matrix(
    requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str], column: str = "dur_ns"
) -> pd.DataFrame:
    """Wide table: one row per measured successful request, one int64 column per stage (ns).

    Columns: the stage names in pipeline order, then ``end_to_end`` and
    ``unattributed``. ``column`` picks host (``dur_ns``) or device
    (``device_dur_ns``) time; for device time end to end is the stage sum.
    """
    req, st = measured_ok(requests, stages)
    wide = st.pivot_table(index="request", columns="stage", values=column, aggfunc="sum")
    wide = wide.reindex(index=req["request"].to_numpy(), columns=stage_order)
    if column == "dur_ns":
        e2e = req.set_index("request")["dur_ns"].reindex(wide.index)
    else:
        e2e = wide.sum(axis=1, min_count=1)
    wide[END_TO_END] = e2e
    wide[UNATTRIBUTED] = e2e - wide[stage_order].sum(axis=1, min_count=1)
    return wide
