import pandas as pd
import pytest

from tests.conftest import toy_pipeline
from workbench import profile
from workbench.analysis.budget import budget, error_counts, stage_matrix, stage_summary
from workbench.record import Run


def _run(clock, **kw):
    pipe = toy_pipeline(clock, {"parse": 1_000_000, "forward": 3_000_000}, **kw)
    return profile(pipe, requests=10, warmup=2, traced=0, clock=clock)


def test_stage_summary_exact(fake_clock):
    run = _run(fake_clock)
    table = stage_summary(run)
    assert list(table["name"]) == ["parse", "forward", "end_to_end", "unattributed"]
    assert list(table["kind"]) == ["stage", "stage", "end_to_end", "unattributed"]
    assert list(table["count"]) == [10, 10, 10, 10]
    assert list(table["p99_ms"]) == [1.0, 3.0, 4.0, 0.0]
    assert list(table["share"]) == [0.25, 0.75, 1.0, 0.0]
    assert table["device_p99_ms"].isna().all()


def test_unattributed_is_end_to_end_minus_stages(fake_clock):
    fake_clock.tick_ns = 7  # every clock read costs 7 ns of "glue"
    run = _run(fake_clock)
    wide = stage_matrix(run.requests, run.stages, run.stage_names)
    # reads per request: t0, (start, end) x 2 stages, t1 -> e2e = 5 gaps of 7 + the stage costs
    assert set(wide["end_to_end"]) == {4_000_000 + 5 * 7}
    assert set(wide["parse"]) == {1_000_000 + 7}
    assert set(wide["unattributed"]) == {5 * 7 - 2 * 7}


def test_failed_and_warmup_requests_are_kept_out_of_percentiles(fake_clock):
    run = _run(fake_clock, fail={"forward": {3, 5}})
    report = budget(run)
    assert report["end_to_end"]["count"] == 8
    assert report["errors"] == {"parse": 0, "forward": 2}
    assert report["warmup"]["count"] == 2
    assert [s["name"] for s in report["stages"]] == ["parse", "forward"]
    assert set(report["stages"][0]) >= {
        "name",
        "count",
        "mean_ms",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "max_ms",
        "share",
    }
    assert report["config"]["batch_size"] == 1


def test_warmup_errors_are_not_counted(fake_clock):
    run = _run(fake_clock, fail={"forward": {0}})
    assert error_counts(run.requests, run.stage_names) == {"parse": 0, "forward": 0}


def test_device_columns_when_present():
    requests = pd.DataFrame(
        {
            "request": [0, 1],
            "warmup": [False, False],
            "start_ns": [0, 10],
            "dur_ns": [10, 12],
            "ok": [True, True],
            "error_stage": [None, None],
            "error_type": [None, None],
            "error_message": [None, None],
            "batch_size": [1, 1],
        }
    )
    stages = pd.DataFrame(
        {
            "request": [0, 1],
            "stage": ["forward", "forward"],
            "stage_index": [0, 0],
            "start_ns": [0, 10],
            "dur_ns": [9, 11],
            "device_dur_ns": pd.array([4, 6], dtype="Int64"),
        }
    )
    run = Run(meta={"stages": ["forward"]}, requests=requests, stages=stages)
    assert stage_summary(run).loc[0, "device_mean_ms"] == pytest.approx(5e-6)
    report = budget(run)
    assert report["stages"][0]["device"]["p50_ms"] == pytest.approx(5e-6)
