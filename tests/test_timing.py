"""time_request: exact stage times, and which exceptions end a request versus the run."""

from __future__ import annotations

import gc
import sys
import time

import numpy as np
import pytest

from tests.conftest import FakeClock
from workbench import timing
from workbench.batching.live import generate
from workbench.timing import GcProbe, time_request


def costing(clock: FakeClock, ns: int, then=None):
    def fn(x):
        clock.advance(ns)
        if then is not None:
            then()
        return x

    return fn


def test_stage_times_are_exact_and_lists_fill_in_place():
    clock = FakeClock(start_ns=1_000)
    starts, ends = [], []
    t = time_request(
        ["a", "b"], [costing(clock, 10), costing(clock, 30)], "x", clock, starts=starts, ends=ends
    )
    assert (t.start_ns, t.end_ns) == (1_000, 1_040)
    assert t.stage_start_ns == [1_000, 1_010] and t.stage_end_ns == [1_010, 1_040]
    assert (
        t.stage_start_ns is starts and t.stage_end_ns is ends
    )  # visible to workbench.guard from another thread
    assert t.failure is None and t.output == "x"


def test_sys_exit_in_a_stage_is_that_requests_failure():
    clock = FakeClock(start_ns=0)
    t = time_request(
        ["parse", "forward", "serialize"],
        [costing(clock, 5), costing(clock, 7, lambda: sys.exit(3)), costing(clock, 11)],
        [1],
        clock,
    )
    assert t.failure.stage == "forward"
    assert (t.failure.error_type, t.failure.message) == ("SystemExit", "3")
    assert t.stage_end_ns == [5, 12] and t.end_ns == 12  # serialize never ran


def test_other_base_exceptions_are_failures_too():
    class Odd(BaseException):
        pass

    def odd(_):
        raise Odd("not an Exception")

    t = time_request(["s"], [odd], None, FakeClock())
    assert (t.failure.error_type, t.failure.message) == ("Odd", "not an Exception")


def test_keyboard_interrupt_from_a_stage_stops_the_run():
    def interrupt(_):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        time_request(["s"], [interrupt], None, FakeClock())


def test_gc_pauses_are_charged_to_the_stage_they_fell_in():
    clock = iter(range(0, 10_000, 10))
    probe = GcProbe(clock=lambda: 0)

    def collects(x):
        probe.pause_ns += 700  # what the probe's callback adds when a collection runs
        return x

    t = time_request(
        ["a", "b", "c"],
        [lambda x: x, collects, lambda x: x],
        1,
        lambda: next(clock),
        gc_probe=probe,
    )
    assert t.stage_gc_ns == [0, 700, 0] and t.failure is None


def test_kept_outputs_are_returned_for_describe_outside_the_timed_region():
    t = time_request(["a", "b"], [lambda x: x + 1, lambda x: x * 10], 1, keep=frozenset({0}))
    assert t.kept == {0: 2} and t.output == 20 and t.stage_gc_ns is None


def test_observed_path_records_a_failure_like_the_plain_one():
    def boom(x):
        raise ValueError("bad")

    t = time_request(["a", "b"], [lambda x: x, boom], 1, keep=frozenset({0, 1}))
    assert t.failure.stage == "b" and t.failure.error_type == "ValueError" and t.kept == {0: 1}
    assert len(t.stage_start_ns) == len(t.stage_end_ns) == 2


def test_describe_runs_after_the_last_clock_read_and_keeps_only_the_numbers():
    import gc
    import weakref

    class Payload:
        def __init__(self, n):
            self.n = n

    refs, calls = [], []
    clock = iter(range(0, 1_000, 10))

    def make(x):
        p = Payload(x * 3)
        refs.append(weakref.ref(p))
        return p

    def describe(p):
        calls.append(next(clock))  # the clock reads before it: start, 2 per stage, end
        return {"n": p.n, "flag": True}

    t = time_request(
        ["make", "drop"], [make, lambda p: "out"], 2, lambda: next(clock), describe={0: describe}
    )
    gc.collect()
    assert refs[0]() is None  # the stage's output is gone with the request
    assert t.attributes == {0: {"n": 6.0, "flag": 1.0}} and t.kept is None and t.output == "out"
    assert (t.start_ns, t.end_ns, calls) == (0, 50, [60])  # describe ran after the end was read


def test_a_raising_describe_is_an_attribute_error_not_a_failure():
    t = time_request(["a"], [lambda x: x], 1, describe={0: lambda v: {"x": 1 / 0}})
    assert (
        t.failure is None
        and t.attributes is None
        and t.attribute_errors == {0: "ZeroDivisionError: division by zero"}
    )


def test_a_collection_adds_its_pause_on_the_injected_clock():
    ticks = iter([100, 350, 1_000, 1_060])
    with GcProbe(clock=lambda: next(ticks)) as probe:
        probe.callback("start", {})
        probe.callback("stop", {})
        probe.callback("start", {})
        probe.callback("stop", {})
    assert probe.pause_ns == 250 + 60 and probe.collections == 2 and probe.max_pause_ns == 250


def test_a_real_collection_is_seen_and_the_callback_is_removed():
    with GcProbe() as probe:
        gc.collect()
    assert probe.collections >= 1 and probe.pause_ns > 0
    assert probe.callback not in gc.callbacks


def test_stop_without_start_is_ignored():
    probe = GcProbe(clock=lambda: 5)
    probe.callback("stop", {})
    assert probe.pause_ns == 0 and probe.collections == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timer slack is Linux's (prctl)")
def test_a_paced_sender_sleeps_with_a_1_ns_timer_slack_restored_after():
    """generate (the in-process load's sender) sends with the thread's slack at 1 ns, so a sleep
    until a due time is not woken 50-75 us late (benchmarks/bench_timer_slack.py); the slack the
    thread had is back afterwards."""
    prctl = timing._prctl()
    before = prctl(timing.PR_GET_TIMERSLACK, 0, 0, 0, 0)
    seen = []

    def submit(item):
        seen.append(prctl(timing.PR_GET_TIMERSLACK, 0, 0, 0, 0))
        return item, time.perf_counter_ns()

    schedule = np.array([0, 200_000, 400_000], dtype=np.int64)
    generate(schedule, [0, 1, 2], submit, start_ns=time.perf_counter_ns())
    assert seen == [1, 1, 1] and before > 1
    assert prctl(timing.PR_GET_TIMERSLACK, 0, 0, 0, 0) == before
