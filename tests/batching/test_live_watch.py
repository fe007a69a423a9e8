"""A live in-process run stopped by a sweep point's stability watch (real clock, real threads)."""

import itertools
import time

from workbench import Pipeline
from workbench.analysis.windows import StabilityWatch
from workbench.batching.arrivals import Arrivals
from workbench.batching.capacity import SweepPlan, point_row
from workbench.batching.live import run_load
from workbench.batching.policy import BatchPolicy

MS = 1_000_000
WINDOW_MS = 200
PER_WINDOW = 20


def spaced_schedule(tmp_path, windows: int) -> Arrivals:
    """20 sends 7.5 ms apart at the start of each 200 ms window, then 57.5 ms of quiet: the last request of
    a window has that long to finish before the next window's first send asks the watch."""
    times = [w * WINDOW_MS + 7.5 * k for w in range(windows) for k in range(PER_WINDOW)]
    path = tmp_path / "arrivals.csv"
    path.write_text("arrival_ms\n" + "\n".join(f"{t:g}" for t in times) + "\n")
    return Arrivals("replay", path=str(path))


def pipeline(sleep_ms_of_item):
    pipe = Pipeline("steady", items=lambda: itertools.count())
    pipe.add("forward", lambda batch: time.sleep(max(map(sleep_ms_of_item, batch)) / 1000) or batch)
    return pipe


def test_a_stable_load_stops_after_three_windows(tmp_path):
    watch = StabilityWatch(WINDOW_MS * MS, 10_000.0, 6)  # any three windows with answers agree
    run = run_load(
        pipeline(lambda item: 0.0),
        arrivals=spaced_schedule(tmp_path, 6),
        policy=BatchPolicy(1, 0.0),
        warmup=1,
        watch=watch,
    )
    assert (watch.windows_run, watch.stable_after) == (3, 3)
    assert (
        len(run.requests) == 3 * PER_WINDOW and run.requests["ok"].all()
    )  # nothing sent after window 2
    assert run.meta.status == "complete" and run.meta.load.requests == 3 * PER_WINDOW
    plan = SweepPlan(
        "rate", (100.0,), window_s=WINDOW_MS / 1000, max_windows=6, stability_pct=10_000.0
    )
    row = point_row(run, plan, 100.0, 0, "p", watch)
    assert (row["windows"], row["stable_after_windows"], row["stopped_by"], row["requests"]) == (
        3,
        3,
        "stable",
        60,
    )


def test_a_load_whose_latency_grows_runs_every_window(tmp_path):
    # window w's requests sleep w ms: p50 1, 2, 3, ... ms never agree within 10 %
    watch = StabilityWatch(WINDOW_MS * MS, 10.0, 6)
    run = run_load(
        pipeline(lambda item: item // PER_WINDOW),
        arrivals=spaced_schedule(tmp_path, 6),
        policy=BatchPolicy(1, 0.0),
        warmup=1,
        watch=watch,
    )
    assert (watch.windows_run, watch.stable_after) == (None, None)
    assert len(run.requests) == 6 * PER_WINDOW
    assert len(watch.p50_ms) == 5  # window 5 ends with the schedule: no send is due after it
