"""The stage matrix places one row per (request, stage) by index arithmetic: pandas' pivot table
(hash-grouping every row) took 4 s of show's 20 on a run of a million requests."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import toy_pipeline
from workbench import profile
from workbench.analysis.matrix import stage_matrix


def pivoted(requests, stages, order, column="dur_ns"):
    """The matrix as pandas builds it: pivot_table, then reindexed to the requests and the order."""
    req = requests[~requests["warmup"] & requests["ok"]]
    st = stages[stages["request"].isin(req["request"])]
    wide = st.pivot_table(index="request", columns="stage", values=column, aggfunc="sum")
    return wide.reindex(index=req["request"].to_numpy(), columns=order)


@pytest.fixture
def run(fake_clock):
    pipe = toy_pipeline(fake_clock, {"parse": 1_000, "forward": 3_000}, fail={"forward": {4}})
    return profile(pipe, requests=8, warmup=2, traced=0, clock=fake_clock)


@pytest.mark.parametrize(
    "cut",
    [
        "nothing",  # every request ran every stage: int64
        "one row",  # a request missing one stage: float64 with NaN
        "a stage",  # a stage without rows: its column all NaN
        "a request",  # a measured request without rows
    ],
)
def test_the_matrix_is_the_pivot_table_without_pivoting(run, cut, monkeypatch):
    stages, order = run.stages, [*run.stage_names, "never"]
    if cut == "one row":
        stages = stages.drop(index=stages.index[5])
    elif cut == "a stage":
        stages = stages[stages["stage"] != "parse"]
    elif cut == "a request":
        stages = stages[stages["request"] != 6]
    want = pivoted(run.requests, stages, order)
    monkeypatch.setattr(pd.DataFrame, "pivot_table", None)  # one row per cell: never called
    wide = stage_matrix(run.requests, stages, order)
    pd.testing.assert_frame_equal(wide[order], want, check_exact=True)
    assert (wide.dtypes[run.stage_names] == "int64").all() == (cut == "nothing")


def test_a_stage_run_twice_in_a_request_is_summed(run):
    twice = pd.concat([run.stages, run.stages[run.stages["request"] == 3]], ignore_index=True)
    wide = stage_matrix(run.requests, twice, run.stage_names)
    pd.testing.assert_frame_equal(
        wide[run.stage_names], pivoted(run.requests, twice, run.stage_names), check_exact=True
    )
    assert wide.at[3, "forward"] == 2 * wide.at[2, "forward"]
