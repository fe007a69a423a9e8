"""A stage that hangs cannot hang a load run: ``timeout_s`` stops the run, and stop never waits on a stuck executor.

The stages block on ``RELEASE`` (``tests/hanging.py``), set at teardown, so no stage
thread outlives its test. Elapsed-time bounds are generous (a busy 2-core machine); without the
fix the no-timeout runs waited 30 s per stuck executor and lost the batches in flight.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import FakeClock
from tests.hanging import RELEASE, hanging, release_stuck_stages  # noqa: F401 (an autouse fixture)
from workbench.batching.arrivals import Arrivals
from workbench.batching.live import run_load
from workbench.batching.policy import BatchPolicy, DynamicBatcher
from workbench.errors import ConfigError
from workbench.record import load_run
from workbench.timing import RequestTiming, StageFailure, time_request

TIMEOUT_MESSAGE = (
    "stage 'forward' still running after the 0.5 s per-request timeout; its thread was abandoned"
)
IN_FLIGHT_MESSAGE = (
    "in flight at stop: stage 'forward' still running when the batcher stopped; "
    "its executor thread was abandoned"
)


def counts(run) -> dict[str, int]:
    req = run.requests
    return {
        "ok": int(req["ok"].sum()),
        **{
            t: int((req["error_type"] == t).sum())
            for t in ("Timeout", "RunStopped", "DrainTimeout")
        },
    }


def fast_schedule(n: int) -> Arrivals:
    """n arrivals within a few ms (all submitted long before a 0.5 s timeout or drain)."""
    return Arrivals("poisson", rate_rps=5000, count=n, seed=0)


# -- timeout_s -------------------------------------------------------------------------


def test_a_batch_past_timeout_s_is_a_timeout_failure_and_the_run_stops(tmp_path):
    began = time.monotonic()
    run = run_load(
        hanging({3}),
        arrivals=fast_schedule(12),
        policy=BatchPolicy(1, 0.0),
        warmup=0,
        timeout_s=0.5,
    )
    assert time.monotonic() - began < 10
    assert counts(run) == {"ok": 3, "Timeout": 1, "RunStopped": 8, "DrainTimeout": 0}
    req = run.requests
    hung = req[req["error_type"] == "Timeout"].iloc[0]
    assert (hung["request"], hung["batch"], hung["error_stage"], hung["error_message"]) == (
        3,
        3,
        "forward",
        TIMEOUT_MESSAGE,
    )
    assert hung["error_where"] is None
    assert set(req.loc[req["error_type"] == "RunStopped", "batch"]) == {-1}
    rows = run.stages[run.stages["request"] == 3]
    assert rows["stage"].tolist() == ["batch_wait", "queue_wait", "parse", "forward"]
    assert (
        rows["dur_ns"].iloc[-1] >= 500_000_000
    )  # the stuck stage's row lasts until it was abandoned
    assert run.meta.status == "incomplete: timeout"
    load = run.meta.load.to_dict()
    assert (
        load["timeout_s"],
        load["dropped"],
        load["in_flight_at_stop"],
        load["requests"],
        load["failed"],
    ) == (0.5, 8, 0, 12, 9)
    assert (
        0.5 < load["utilization"] <= 1.0
    )  # the hung batch's 0.5 s is busy time within the busy span
    assert load_run(run.save(tmp_path / "run")).meta.status == "incomplete: timeout"


def test_a_timeout_cancels_the_rest_of_the_schedule():
    arrivals = Arrivals("poisson", rate_rps=100, count=500, seed=0)  # 5 s of arrivals
    began = time.monotonic()
    run = run_load(
        hanging({2}), arrivals=arrivals, policy=BatchPolicy(1, 0.0), warmup=0, timeout_s=0.5
    )
    assert time.monotonic() - began < 4
    c = counts(run)
    assert (c["ok"], c["Timeout"], c["DrainTimeout"]) == (2, 1, 0)
    assert len(run.requests) == 3 + c["RunStopped"] < 500  # the generator stopped submitting


def test_a_warm_up_call_past_timeout_s_stops_the_run_before_any_arrival(tmp_path):
    began = time.monotonic()
    run = run_load(
        hanging({0}),
        arrivals=fast_schedule(10),
        policy=BatchPolicy(2, 0.0),
        warmup=1,
        timeout_s=0.5,
    )
    assert time.monotonic() - began < 10  # was: the warm-up wait, then 30 s per executor
    assert len(run.requests) == 0 and run.meta.status == "incomplete: timeout"
    assert run.meta.load.warmup_failures == [
        {
            "stage": "forward",
            "type": "Timeout",
            "message": TIMEOUT_MESSAGE,
            "where": None,
            "count": 1,
        }
    ]
    loaded = load_run(run.save(tmp_path / "run"))
    assert loaded.meta.status == "incomplete: timeout" and len(loaded.requests) == 0


def test_timeout_s_leaves_a_healthy_run_complete_and_exact():
    run = run_load(
        hanging(set()),
        arrivals=fast_schedule(10),
        policy=BatchPolicy(2, 0.0),
        warmup=1,
        timeout_s=5,
    )
    assert counts(run) == {"ok": 10, "Timeout": 0, "RunStopped": 0, "DrainTimeout": 0}
    assert run.meta.status == "complete" and run.meta.load.timeout_s == 5.0


@pytest.mark.parametrize("bad", [0, -1, "1", True])
def test_timeout_s_must_be_a_positive_number(bad):
    with pytest.raises(ConfigError, match="timeout_s must be a number of seconds > 0"):
        run_load(
            hanging(set()), arrivals=fast_schedule(1), policy=BatchPolicy(1, 0.0), timeout_s=bad
        )


# -- no timeout: the drain deadline bounds the stop --------------------------------------


@pytest.mark.parametrize("concurrency", [1, 2])
def test_batches_in_flight_at_the_drain_deadline_are_recorded_and_stop_is_prompt(concurrency):
    hang = {3, 4}  # with 2 executors both are stuck (each on its own batch)
    stuck = min(concurrency, 2)
    began = time.monotonic()
    run = run_load(
        hanging(hang),
        arrivals=fast_schedule(12),
        policy=BatchPolicy(1, 0.0, concurrency),
        warmup=0,
        drain_timeout_s=0.5,
    )
    assert time.monotonic() - began < 10  # was 30 s per stuck executor
    assert counts(run) == {
        "ok": 3,
        "Timeout": stuck,
        "RunStopped": 0,
        "DrainTimeout": 12 - 3 - stuck,
    }
    req = run.requests
    timed_out = req[req["error_type"] == "Timeout"]
    assert timed_out["request"].tolist() == [3, 4][:stuck]
    assert set(timed_out["error_message"]) == {IN_FLIGHT_MESSAGE} and set(
        timed_out["error_stage"]
    ) == {"forward"}
    assert run.meta.load.in_flight_at_stop == stuck and run.meta.status == "complete"


# -- the batcher itself, under an injected clock -----------------------------------------


def test_stop_records_the_batch_in_flight_at_its_stage_with_exact_times():
    clock = FakeClock(start_ns=0)
    entered = threading.Event()

    def parse(batch):
        clock.advance(1_000)
        return batch

    def forward(batch):
        entered.set()
        RELEASE.wait(60)
        return batch

    def execute(items, starts=None, ends=None):
        return time_request(
            ["parse", "forward"], [parse, forward], items, clock, starts=starts, ends=ends
        )

    batcher = DynamicBatcher(
        execute, BatchPolicy(1, 0.0), clock=clock, stage_names=["parse", "forward"]
    ).start()
    batcher.submit("a", arrival_ns=0)
    assert entered.wait(5)
    batcher.submit("b", arrival_ns=10)  # queued behind the stuck executor
    clock.advance(5_000)
    began = time.monotonic()
    assert batcher.stop(abort=True, join_timeout_s=0.2) == [(1, 10)]
    assert time.monotonic() - began < 5
    [rec] = batcher.batches
    t = rec.timing
    assert (rec.batch, rec.requests, rec.close_ns, rec.start_ns, rec.end_ns) == (
        0,
        [0],
        0,
        0,
        6_000,
    )
    assert (t.start_ns, t.end_ns, t.stage_start_ns, t.stage_end_ns) == (
        0,
        6_000,
        [0, 1_000],
        [1_000, 6_000],
    )
    assert (t.failure.stage, t.failure.error_type, t.failure.message) == (
        "forward",
        "Timeout",
        IN_FLIGHT_MESSAGE,
    )
    assert batcher.in_flight_at_stop == 1
    RELEASE.set()  # the abandoned executor finishes late: its result is dropped, not recorded twice
    for thread in batcher._threads:
        thread.join(5)
    assert len(batcher.batches) == 1


def test_a_timed_out_batch_halts_the_batcher():
    clock = FakeClock(start_ns=0)

    def execute(items):
        if items == ["b"]:
            return RequestTiming(
                0, 0, [], [], None, StageFailure("forward", "Timeout", "past the timeout")
            )
        return time_request(["forward"], [list], items, clock)

    batcher = DynamicBatcher(execute, BatchPolicy(1, 0.0), clock=clock)
    for item in "abcd":
        batcher.submit(item, arrival_ns=0)
    batcher.start()
    assert batcher.wait_done(5) and batcher.halted.is_set() and batcher.stopped_by == "timeout"
    assert batcher.stop(abort=True) == [(2, 0), (3, 0)]
    assert [r.requests for r in batcher.batches] == [[0], [1]]
