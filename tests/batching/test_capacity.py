"""Capacity sweeps on synthetic runs: point rows, the sweep folder, rate=auto's stop, the knee, predictions."""

import json
import os
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from workbench.batching.capacity import (
    SweepPlan,
    add_prediction,
    read_sweep,
    parse_sweep,
    point_row,
    points_table,
    run_sweep,
)
from workbench.errors import ConfigError

MS = 1_000_000
S = 1_000_000_000


def fake_run(
    rate: float,
    seconds: float,
    latency_ms,
    lag_ms: float = 0.25,
    noisy=False,
    fail_every=0,
    count=None,
):
    """Evenly spaced sends at ``rate``; ``latency_ms(t_s)`` per request; one stage ``work`` = 3/4 of it.

    count: the first ``count`` of those sends only (a schedule a watch stopped).
    """
    n = int(rate * seconds) if count is None else count
    start = (np.arange(n) * (S / rate)).astype(np.int64)
    dur = np.array([int(latency_ms(t / S) * MS) for t in start], dtype=np.int64)
    ok = np.ones(n, dtype=bool)
    if fail_every:
        ok[::fail_every] = False
    requests = pd.DataFrame(
        {
            "request": np.arange(n),
            "start_ns": start,
            "dur_ns": dur,
            "ok": ok,
            "error_stage": np.where(ok, None, "work"),
        }
    )
    stages = pd.DataFrame({"request": np.arange(n), "stage": "work", "dur_ns": dur * 3 // 4})
    meta = SimpleNamespace(
        load=SimpleNamespace(
            generator_lag_p99_ms=lag_ms,
            generator_lag_ms=2 * lag_ms,
            arrivals={"rate_rps": rate},
            policy={"max_batch_size": 1, "max_wait_ms": 0.0, "concurrency": 1},
        ),
        noise=SimpleNamespace(noisy=noisy),
    )
    return SimpleNamespace(requests=requests, stages=stages, meta=meta, stage_names=["work"])


def test_parse_sweep():
    assert parse_sweep("rate=50,100,200") == ("rate", (50.0, 100.0, 200.0))
    assert parse_sweep("rate=auto") == ("rate", None)
    assert parse_sweep("concurrency=1,2,4") == ("concurrency", (1.0, 2.0, 4.0))
    for bad in (
        "rate",
        "speed=1,2",
        "rate=100,50",
        "rate=a,b",
        "concurrency=auto",
        "concurrency=1.5",
        "rate=0,1",
    ):
        with pytest.raises(ConfigError, match="--sweep"):
            parse_sweep(bad)


def test_plan_refuses_what_it_cannot_measure():
    with pytest.raises(ConfigError, match="needs --sla-ms"):
        SweepPlan("rate", None)


def test_point_row_of_a_settling_run_uses_the_first_stable_trio():
    # latency 20 ms in the first second, 10 ms after: windows of 1 s, stable at windows 1..3
    run = fake_run(100, 6, lambda t: 20.0 if t < 1 else 10.0, fail_every=50)
    plan = SweepPlan("rate", (100.0,), window_s=1.0, max_windows=6)
    row = point_row(run, plan, 100.0, 0, "point-00-rate-100")
    assert row["stable"] and row["windows_used"] == [1, 2, 3] and row["stable_after_windows"] == 4
    assert row["requests"] == 300 and row["failed"] == 6 and row["offered_rps"] == 100.0
    assert row["failures"] == {"work": 6}
    # successes finished in [1 s, 4 s): 2 sent in window 0 (at 0.98, 0.99 s + 20 ms) and 293 of the 294 sent
    # after (the one sent at 3.99 s ends at 4.00 s, outside): 295 over 3 s
    assert row["achieved_rps"] == 295 / 3
    assert row["p50_ms"] == 10.0 and row["p99_ms"] == 10.0
    assert row["stages"] == {"work": {"p50_ms": 7.5, "p95_ms": 7.5, "p99_ms": 7.5}}
    assert (
        row["generator_lag_p99_ms"] == 0.25
        and row["generator_lag_max_ms"] == 0.5
        and row["noisy"] is False
    )
    assert len(row["window_table"]) == 6 and row["window_table"][0]["p50_ms"] == 20.0


def test_point_row_of_a_growing_queue_is_unstable_and_reports_the_last_three_windows():
    run = fake_run(100, 5, lambda t: 10.0 + 40.0 * t)  # latency grows 40 ms per second
    row = point_row(run, SweepPlan("rate", (100.0,), window_s=1.0, max_windows=5), 100.0, 0, "p")
    assert (
        not row["stable"]
        and row["windows_used"] == [2, 3, 4]
        and row["stable_after_windows"] is None
    )


def _measure(latency_for_rate, capacity_rps):
    """A fake server: achieved rate capped at ``capacity_rps`` (late completions fall out of the windows)."""

    def measure(value, folder, watch):
        folder.mkdir()
        return fake_run(
            value,
            3,
            lambda t: latency_for_rate(value) if value < capacity_rps else 10.0 + 100.0 * t,
        )

    return measure


def test_a_listed_sweep_writes_a_monotone_table_and_the_knee(tmp_path):
    plan = SweepPlan("rate", (25.0, 50.0, 100.0, 200.0), window_s=1.0, max_windows=3, sla_ms=15.0)
    record = run_sweep(
        plan, _measure(lambda r: 5.0 + r / 20.0, 150), tmp_path / "s", {"kind": "load"}
    )
    saved = read_sweep(tmp_path / "s")
    assert saved == json.loads(json.dumps(record)) | {"url": None, "created": None}
    table = points_table(saved)
    assert table["offered_rps"].tolist() == [25.0, 50.0, 100.0, 200.0]
    assert table["p99_ms"].tolist()[:3] == [6.25, 7.5, 10.0]
    assert table["stable"].tolist() == [True, True, True, False]
    assert saved["stopped"] == "list done"
    # the request sent at 2.99 s ends at 3.00 s, after the last window: 299 finished in 3 s
    assert saved["knee"] == {
        "point": 2,
        "offered_rps": 100.0,
        "achieved_rps": 299 / 3,
        "p99_ms": 10.0,
    }
    assert [p["run"] for p in saved["points"]] == [
        "point-00-rate-25",
        "point-01-rate-50",
        "point-02-rate-100",
        "point-03-rate-200",
    ]


def test_rate_auto_doubles_until_p99_passes_the_sla(tmp_path):
    plan = SweepPlan("rate", None, window_s=1.0, max_windows=3, sla_ms=9.0, start_rate_rps=25.0)
    record = run_sweep(
        plan, _measure(lambda r: 5.0 + r / 20.0, 1e9), tmp_path / "s", {"kind": "load"}
    )
    assert [p["rate_rps"] for p in record["points"]] == [25.0, 50.0, 100.0]  # p99 at 100: 10 ms > 9
    assert record["stopped"] == "p99 passed the SLA" and record["knee"]["offered_rps"] == 50.0


def test_rate_auto_stops_when_throughput_stops_growing(tmp_path):
    def measure(value, folder, watch):
        folder.mkdir()
        return fake_run(
            min(value, 60.0), 3, lambda t: 5.0
        )  # the generator cannot send more than 60 req/s

    plan = SweepPlan("rate", None, window_s=1.0, max_windows=3, sla_ms=50.0, start_rate_rps=20.0)
    record = run_sweep(plan, measure, tmp_path / "s", {"kind": "load"})
    assert [p["rate_rps"] for p in record["points"]] == [20.0, 40.0, 80.0, 160.0]
    assert record["stopped"] == "throughput stopped growing"


def test_rate_auto_stops_at_max_points(tmp_path):
    plan = SweepPlan(
        "rate", None, window_s=1.0, max_windows=3, sla_ms=1e6, start_rate_rps=10.0, max_points=2
    )
    record = run_sweep(plan, _measure(lambda r: 5.0, 1e9), tmp_path / "s", {"kind": "load"})
    assert len(record["points"]) == 2 and record["stopped"] == "--max-points 2 reached"


def test_an_existing_folder_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="already exists"):
        run_sweep(SweepPlan("rate", (1.0,)), _measure(lambda r: 1.0, 10), tmp_path, {})


def test_prediction_ratios_per_point(tmp_path):
    plan = SweepPlan("rate", (25.0, 50.0), window_s=1.0, max_windows=3)
    record = run_sweep(
        plan, _measure(lambda r: 5.0 + r / 20.0, 1e9), tmp_path / "s", {"kind": "load"}
    )
    predicted = pd.DataFrame(
        {
            "p50_ms": [5.0, 5.0],
            "p99_ms": [12.5, 0.0],
            "stable": [True, True],
            "capacity_rps": [400.0, 400.0],
        }
    )
    out = add_prediction(record, predicted, "test")
    assert (
        out["points"][0]["predicted"]["p50_ratio"] == 1.25
        and out["points"][0]["predicted"]["p99_ratio"] == 0.5
    )
    assert out["points"][1]["predicted"]["p99_ratio"] is None  # a zero prediction has no ratio
    assert points_table(out)["predicted_p50_ratio"].tolist() == [1.25, 1.5]


def test_read_sweep_names_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="not a sweep folder"):
        read_sweep(tmp_path)
    (tmp_path / "sweep.json").write_text('{"format": "other"}')
    with pytest.raises(ConfigError, match="missing required field `version`"):
        read_sweep(tmp_path)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda f: os.mkfifo(f), "is a FIFO (named pipe), not a regular file"),
        (lambda f: os.symlink("/dev/zero", f), "a symbolic link out of the sweep folder"),
        (lambda f: f.write_text("[" * 100_000 + "]" * 100_000), "expected `object`, got `array`"),
        (lambda f: f.write_bytes(b'{"format": "\xff"}'), "not valid JSON"),
        (lambda f: f.write_text("[]"), "expected `object`, got `array` (value [])"),
    ],
)
def test_read_sweep_refuses_what_is_not_a_sweep_file_in_one_error(tmp_path, make, message):
    """Issue 35: the dashboard's sweep reader hung on a FIFO, read /dev/zero until memory ran out and
    raised RecursionError on deep nesting; now one ConfigError naming the file."""
    make(tmp_path / "sweep.json")
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        read_sweep(tmp_path)
    assert str(tmp_path / "sweep.json") in str(info.value)


def test_compare_sweeps_matches_points_on_the_swept_value(tmp_path):
    from workbench.batching.capacity import compare_sweeps

    plan_a = SweepPlan("rate", (25.0, 50.0, 100.0), window_s=1.0, max_windows=3)
    plan_b = SweepPlan("rate", (50.0, 100.0, 200.0), window_s=1.0, max_windows=3)
    a = run_sweep(plan_a, _measure(lambda r: 5.0 + r / 20.0, 1e9), tmp_path / "a", {"kind": "load"})
    b = run_sweep(
        plan_b, _measure(lambda r: 2 * (5.0 + r / 20.0), 1e9), tmp_path / "b", {"kind": "load"}
    )
    table = compare_sweeps(a, b)
    assert table["value"].tolist() == [50.0, 100.0]
    assert table["a_p99_ms"].tolist() == [7.5, 10.0] and table["b_p99_ms"].tolist() == [15.0, 20.0]
    assert table["p50_ratio"].tolist() == [2.0, 2.0] and table["p99_ratio"].tolist() == [2.0, 2.0]
    # at 100 req/s B's last two requests (20 ms) end after the last window, A's last one (10 ms)
    assert table["achieved_ratio"].tolist() == [1.0, (298 / 3) / (299 / 3)]
    other = SweepPlan("concurrency", (1.0,), window_s=1.0, max_windows=3)
    c = run_sweep(other, _measure(lambda r: 1.0, 1e9), tmp_path / "c", {"kind": "load"})
    with pytest.raises(ConfigError, match="vary different things"):
        compare_sweeps(a, c)


def sent_until_stopped(rate: float, seconds: float, latency_ms, watch) -> int:
    """A generator on a fake clock: sends evenly spaced at ``rate``; before each, the watch hears of the
    requests that ended and is asked whether to stop. Returns how many were sent."""
    n = int(rate * seconds)
    start = [int(k * (S / rate)) for k in range(n)]
    end = sorted((t + int(latency_ms(t / S) * MS), t) for t in start)
    done = 0
    for k, t in enumerate(start):
        while done < n and end[done][0] <= t:
            finish, sent = end[done]
            watch.finished(sent, sent, finish - sent, True)
            done += 1
        if watch.stop(t):
            return k
        watch.sent(t)
    return n


def _watched(latency_for_rate):
    """A fake point whose generator honours the sweep's watch (it stops once the point is stable)."""

    def measure(value, folder, watch):
        folder.mkdir()
        latency = lambda t: latency_for_rate(value, t)  # noqa: E731
        count = sent_until_stopped(value, 10.0, latency, watch)
        return fake_run(value, 10.0, latency, count=count)

    return measure


def test_a_stable_point_stops_after_three_windows_and_an_unstable_one_runs_to_max_windows(tmp_path):
    # 100 req/s, windows of 1 s, at most 10: at 100 req/s 5 ms flat (stable from the start); at 200 req/s
    # 10 ms growing 10 ms per second (never within 10 %)
    plan = SweepPlan("rate", (100.0, 200.0), window_s=1.0, max_windows=10)
    record = run_sweep(
        plan,
        _watched(lambda r, t: 5.0 if r < 150 else 10.0 + 10.0 * t),
        tmp_path / "s",
        {"kind": "load"},
    )
    stable, unstable = record["points"]
    assert (stable["windows"], stable["stable_after_windows"], stable["stopped_by"]) == (
        3,
        3,
        "stable",
    )
    assert stable["stable"] and stable["windows_used"] == [0, 1, 2] and stable["requests"] == 300
    assert len(stable["window_table"]) == 3
    assert (unstable["windows"], unstable["stable_after_windows"], unstable["stopped_by"]) == (
        10,
        None,
        "max-windows",
    )
    assert not unstable["stable"] and unstable["windows_used"] == [7, 8, 9]
    assert (
        unstable["requests"] == 600
    )  # the last three windows' sends, of the 2,000 of the whole schedule
    assert points_table(read_sweep(tmp_path / "s"))["stopped_by"].tolist() == [
        "stable",
        "max-windows",
    ]


def test_a_point_that_settles_late_stops_at_the_boundary_after_its_trio(tmp_path):
    # 30 ms in the first two seconds, 10 ms after: stable at windows 2..4; the request sent at 4.99 s ends
    # at 5.00 s, in time for the send due then, which is the first one not made
    plan = SweepPlan("rate", (100.0,), window_s=1.0, max_windows=10)
    record = run_sweep(
        plan, _watched(lambda r, t: 30.0 if t < 2 else 10.0), tmp_path / "s", {"kind": "load"}
    )
    (p,) = record["points"]
    assert (p["windows"], p["stable_after_windows"], p["windows_used"]) == (5, 5, [2, 3, 4])
    assert p["stopped_by"] == "stable" and p["requests"] == 300 and p["p99_ms"] == 10.0


def test_a_run_without_the_watch_runs_every_window(tmp_path):
    # the Locust engine sends the whole schedule: a stable point then says it ran them all
    plan = SweepPlan("rate", (100.0,), window_s=1.0, max_windows=5)
    row = point_row(fake_run(100.0, 5, lambda t: 5.0), plan, 100.0, 0, "p", plan.watch())
    assert (row["windows"], row["stable_after_windows"], row["stopped_by"]) == (5, 3, "max-windows")
