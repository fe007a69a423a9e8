"""Tail attribution with exact numbers from tables built in code."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import toy_pipeline
from workbench import profile
from workbench.analysis.tail import (
    MIN_REQUESTS_FOR_1PCT,
    median_set,
    slowest,
    stage_matrix,
    tail_attribution,
)

MS = 1_000_000


def tables(b_ms: list[float], a_ms: float = 1.0, glue_ms: float = 0.0, warmup: int = 0):
    """Two stages a, b; e2e = a + b + glue; the first ``warmup`` rows are warm-up."""
    req, st = [], []
    for i, b in enumerate(b_ms):
        e2e = int((a_ms + b + glue_ms) * MS)
        req.append({"request": i, "warmup": i < warmup, "ok": True, "dur_ns": e2e})
        st.append({"request": i, "stage": "a", "dur_ns": int(a_ms * MS), "device_dur_ns": None})
        st.append({"request": i, "stage": "b", "dur_ns": int(b * MS), "device_dur_ns": None})
    return pd.DataFrame(req), pd.DataFrame(st).astype({"device_dur_ns": "Int64"})


def test_two_slow_requests_in_200_make_the_1pct_tail():
    requests, stages = tables([1.0] * 198 + [99.0, 99.0])
    t = tail_attribution(requests, stages, ["a", "b"])
    one = t["sets"]["slowest_1pct"]
    assert one["count"] == 2 and one["shares"] == {"a": 0.01, "b": 0.99, "unattributed": 0.0}
    five = t["sets"]["slowest_5pct"]
    assert five["count"] == 10
    assert five["shares"]["a"] == pytest.approx(10 / 216) and five["shares"]["b"] == pytest.approx(
        206 / 216
    )
    med = t["sets"]["median"]
    assert med["count"] == 198 and med["shares"] == {"a": 0.5, "b": 0.5, "unattributed": 0.0}
    assert (
        t["headline"] == "in the slowest 1 %, b holds 99% of the time; in the median request, 50%"
    )
    assert [r["name"] for r in t["stages"]] == ["a", "b", "unattributed"]
    assert t["stages"][1] == {
        "name": "b",
        "share_slowest_1pct": 0.99,
        "share_slowest_5pct": pytest.approx(206 / 216),
        "share_median": 0.5,
    }


def test_unattributed_glue_is_a_share_and_shares_add_to_one():
    requests, stages = tables([1.0] * 199 + [5.0], glue_ms=2.0)
    t = tail_attribution(requests, stages, ["a", "b"])
    one = t["sets"]["slowest_1pct"]["shares"]
    assert one == pytest.approx(
        {"a": 2 / 12, "b": 6 / 12, "unattributed": 4 / 12}
    )  # 8 ms + a 4 ms request
    assert sum(t["sets"]["median"]["shares"].values()) == pytest.approx(1.0)


def test_below_200_requests_the_1pct_row_is_omitted_with_the_reason():
    requests, stages = tables([1.0] * (MIN_REQUESTS_FOR_1PCT - 1))
    t = tail_attribution(requests, stages, ["a", "b"])
    assert t["sets"]["slowest_1pct"] is None and t["stages"][0]["share_slowest_1pct"] is None
    assert "199 requests" in t["notes"][0] and "at least 200" in t["notes"][0]
    assert t["headline"].startswith("in the slowest 5 %")


def test_warmup_and_failed_requests_stay_out():
    requests, stages = tables([500.0] * 5 + [1.0] * 201, warmup=5)
    requests.loc[10, "ok"] = False
    t = tail_attribution(requests, stages, ["a", "b"])
    assert t["requests"] == 200 and t["sets"]["slowest_1pct"]["shares"]["b"] == 0.5


def test_slowest_breaks_ties_by_request_and_median_band_is_inclusive():
    e2e = pd.Series(
        [5, 5, 5, 1, 2, 3, 4, 6, 7, 8], index=pd.Index(range(10), name="request"), name="e2e_ns"
    )
    assert list(slowest(e2e, 0.25)) == [9, 8, 7]  # ceil(2.5) = 3
    assert list(slowest(e2e, 0.5)) == [9, 8, 7, 0, 1]
    assert list(median_set(e2e)) == [0, 1, 2]  # p40 = 4.6, p60 = 5.0 (linear)


def test_no_successful_request_gives_an_empty_attribution():
    requests, stages = tables([1.0] * 3)
    requests["ok"] = False
    t = tail_attribution(requests, stages, ["a", "b"])
    assert (
        t["requests"] == 0
        and t["headline"] is None
        and t["notes"] == ["no successful measured request"]
    )


def test_median_set_is_the_middle_requests_when_the_band_holds_none():
    """p40-p60 of four distinct values lies between the 2nd and 3rd (linear): those two are the set."""
    four = pd.Series([40, 10, 30, 20], index=pd.Index([7, 8, 9, 6], name="request"))
    assert list(median_set(four)) == [9, 6]  # 30 and 20 ms: the band, 22-28 ms, held none
    two = pd.Series([50, 30], index=pd.Index([0, 1], name="request"))
    assert list(median_set(two)) == [0, 1]  # band 38-42 ms
    assert list(median_set(two.iloc[:0])) == []


# The stage matrix places one row per (request, stage) by index arithmetic: pandas' pivot table
# (hash-grouping every row) took 4 s of show's 20 on a run of a million requests.
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
