"""The stack sampler: stacks start at the stage function, and samples land in their request and stage."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from workbench.errors import ConfigError
from workbench.sampling import StackSampler, assign
from workbench.wait_classes import portable_file
from workbench.timing import time_request


def test_a_sample_taken_inside_a_stage_starts_at_the_stage_function():
    sampler = StackSampler()

    def inner(x):
        sampler.sample()  # this thread, inside the stage: the stack is stage -> inner -> sample
        return x

    def decode(x):
        return inner(x)

    t = time_request(["parse", "decode"], [lambda x: x, decode], 1)
    assert len(sampler.samples_ns) == 1 and sampler.ticks == 1
    frames = sampler.stacks[sampler.sample_stacks[0]]
    assert [f[1] for f in frames] == ["decode", "inner", "sample"]
    assert frames[0][0].endswith("test_sampling.py")
    out = assign(sampler, [t], ["parse", "decode"])
    assert (out.request, out.stage, out.stack, out.unassigned) == ([0], ["decode"], [0], 0)


def test_outside_a_stage_nothing_is_recorded():
    sampler = StackSampler()
    sampler.sample()
    assert sampler.ticks == 1 and len(sampler.samples_ns) == 0


def test_the_thread_samples_a_running_stage_and_assign_finds_it():
    # a stage spinning in Python holds the GIL: the sampler gets it at the switch interval (5 ms) at best,
    # much later on a busy machine (one sample in 80 ms seen in CI), so each request spins until the
    # sampler has taken two samples inside it (5 s at most), not for a fixed time
    def spin(x):
        start, end = len(sampler.samples_ns), time.perf_counter_ns() + 5_000_000_000
        while len(sampler.samples_ns) < start + 2 and time.perf_counter_ns() < end:
            pass
        return x

    with StackSampler(interval_s=0.002) as sampler:
        timings = [time_request(["wait", "spin"], [lambda x: x, spin], i) for i in range(2)]
    out = assign(sampler, timings, ["wait", "spin"])
    assert len(out.stage) >= 4 and set(out.stage) == {"spin"} and set(out.request) == {0, 1}
    assert all(out.stacks[s][0][1] == "spin" for s in out.stack)


def test_assign_uses_the_stage_intervals_and_counts_samples_between_them():
    class T:
        def __init__(self, starts, ends):
            self.stage_start_ns, self.stage_end_ns = starts, ends

    sampler = StackSampler()
    sampler.samples_ns.extend([5, 10, 19, 20, 25, 40])
    sampler.sample_stacks.extend([0, 0, 1, 1, 1, 0])
    out = assign(sampler, [T([10, 20], [20, 30]), T([35], [45])], ["a", "b"])
    assert (out.request, out.stage, out.stack, out.unassigned) == (
        [0, 0, 0, 0, 1],
        ["a", "a", "b", "b", "a"],
        [0, 1, 1, 1, 0],
        1,
    )


def test_interval_must_be_positive():
    with pytest.raises(ConfigError, match="sample interval must be > 0"):
        StackSampler(interval_s=0)


def test_every_thread_is_recorded_with_its_counters_and_each_stage_sample_with_its_class(tmp_path):
    """An injected clock and counters: the stage thread was on CPU 1 of 10 ms while the other ran 6
    (threads other tests left running have no counter here: they are not recorded)."""
    from workbench.sampling import ROW_COLUMNS

    counters: dict[int, tuple[int, int]] = {}
    clock = iter([1_000, 10_001_000]).__next__
    sampler = StackSampler(clock=clock, cpu_reader=counters.get)
    started, release = threading.Event(), threading.Event()

    def other_thread():
        started.set()
        release.wait()

    worker = threading.Thread(target=other_thread, name="snapshot")
    worker.start()
    started.wait()
    me, them = threading.get_native_id(), worker.native_id

    def stage(x):
        counters.update({me: (0, 0), them: (0, 0)})
        sampler.sample()  # first sight of each thread: no delta yet
        counters.update({me: (1_000_000, 0), them: (6_000_000, 1_000_000)})
        sampler.sample()
        return x

    try:
        time_request(["stage"], [stage], 1)
    finally:
        release.set()
        worker.join()
    rows = sorted(
        zip(*(sampler.rows[c].tolist() for c in ROW_COLUMNS)), key=lambda r: (r[0], -r[8])
    )
    names = sampler.thread_names
    # (t_ns, dt_ns, thread, stack, cpu_ns, rq_ns, cls, site, in_stage), by time, the stage thread first.
    # tick 1: the stage thread (no counters yet: cpu, code 0); the idle other thread is not recorded.
    # tick 2: the stage thread blocked in plain Python while 'snapshot' was busy 7 of 10 ms: gil (code 2)
    assert [(r[0], r[1], names[r[2]], r[4], r[5], r[6], r[8]) for r in rows] == [
        (1_000, 5_000_000, "MainThread", -1, -1, 0, 1),
        (10_001_000, 10_000_000, "MainThread", 1_000_000, 0, 2, 1),
        (10_001_000, 10_000_000, "snapshot", 6_000_000, 1_000_000, 0, 0),
    ]
    assert sampler.cpu_source == "injected"
    saved = sampler.record(origin_ns=1_000)
    assert sorted(saved["rows"]["t_ns"]) == [0, 10_000_000, 10_000_000]
    assert sorted(saved["threads"]) == ["MainThread", "snapshot"]
    functions = [saved["frames"][f][1] for f in saved["stacks"][rows[2][3]]]
    assert functions[-3:] == ["other_thread", "wait", "wait"]  # whole: from the thread's start


def test_a_collection_still_running_counts_to_the_sample_that_interrupts_it():
    from workbench.sampling import GcEvents

    now = iter([100, 150, 400]).__next__
    events = GcEvents(now)
    events.callback("start", {"generation": 2})  # at 100
    events.callback("stop", {"generation": 2, "collected": 7})  # at 150: 50 ns
    events.callback("start", {"generation": 0})  # at 400, not stopped yet
    assert events.overlap_ns(0, 120) == 20 and events.overlap_ns(120, 500) == 30 + 100
    assert (events.generation.tolist(), events.collected.tolist()) == ([2], [7])


def test_a_sample_read_between_a_collections_start_and_its_duration_counts_the_others():
    """The sampler thread can read while the callback has appended a start and not yet its duration:
    that used to be an IndexError, which ended the sampler thread for the rest of the run."""
    from workbench.sampling import GcEvents

    events = GcEvents(iter([100, 150]).__next__)
    events.callback("start", {"generation": 2})
    events.callback("stop", {"generation": 2, "collected": 7})  # 100-150
    events.start_ns.append(300)  # the next one half appended
    assert events.overlap_ns(0, 500) == 50


def test_a_frame_without_a_line_is_recorded_at_its_functions_first_line():
    """``f_lineno`` is None while a frame runs an instruction with no line: a null there made the
    whole run.json unreadable ('sampled.frames' item [36][2] must be int, got None)."""
    from types import SimpleNamespace

    def stage(x):
        return x

    sampler = StackSampler()
    frame = SimpleNamespace(f_code=stage.__code__, f_lineno=None, f_back=None)
    sampler._intern(sampler._stack(frame))
    code = stage.__code__
    assert sampler.record(origin_ns=0)["frames"] == [
        [portable_file(code.co_filename), "stage", code.co_firstlineno]
    ]


def test_a_collection_a_thread_triggered_is_named_after_that_thread_ended():
    """The sampler's own allocations trigger collections too; recorded after its thread ended, such a
    collection was charged to 'thread 1398...' (a served run: 6 of its 8.4 ms of pauses)."""
    sampler = StackSampler(clock=iter(range(10)).__next__)

    def collector():
        sampler.gc.callback("start", {})
        sampler.gc.callback("stop", {"generation": 0, "collected": 3})

    thread = threading.Thread(target=collector, name="short-lived")
    thread.start()
    thread.join()
    saved = sampler.record(origin_ns=0)
    assert saved["threads"][saved["gc"]["thread"][0]] == "short-lived"
    assert saved["gc"]["dur_ns"] == [1] and saved["gc"]["collected"] == [3]


def test_thread_cpu_is_read_from_each_threads_clock_and_an_ended_thread_is_an_error():
    """Linux's per-thread CPU clock, by kernel id, with the GIL kept (module docstring): a spinning
    thread's nanoseconds grow; a thread that ended is an OSError the sampler catches, not a crash."""
    from workbench.sampling import thread_cpu_reader

    reader, name = thread_cpu_reader()
    if not sys.platform.startswith("linux"):
        pytest.skip("thread CPU clocks by kernel id are Linux's")
    assert name == "thread_clock"
    me = threading.get_native_id()
    (before, rq), deadline = reader(me), time.perf_counter_ns() + 5_000_000_000
    while reader(me)[0] - before < 5_000_000 and time.perf_counter_ns() < deadline:
        pass  # spins until 5 ms on CPU (5 s at most: a clock that never moved fails below)
    assert rq is None and reader(me)[0] - before >= 5_000_000
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()  # returns before the kernel thread is gone: its clock goes a moment later
    deadline = time.monotonic() + 5
    with pytest.raises(OSError):
        while time.monotonic() < deadline:
            reader(ended.native_id)
            time.sleep(0.001)


def test_a_thread_due_and_not_yet_in_a_stage_is_recorded_as_waiting_to_start():
    """``mark_due``: past the due time, the thread outside a stage is a stage row (class from its CPU,
    never from its call: it sleeps in the pacer), not a stack sample; before it, nothing."""
    from workbench.sampling import mark_due
    from workbench.wait_classes import CODE

    clock = iter([1_000, 2_000, 3_000]).__next__
    sampler = StackSampler(clock=clock, cpu_reader=None)
    try:
        mark_due(1_500)
        sampler.sample()  # 1_000: not yet due
        sampler.sample()  # 2_000: due, not in a stage
        mark_due(None)
        sampler.sample()  # 3_000: nothing due
    finally:
        mark_due(None)
    assert list(sampler.rows["t_ns"]) == [2_000] and list(sampler.rows["in_stage"]) == [2]
    assert list(sampler.rows["cls"]) == [CODE["cpu"]] and list(sampler.rows["site"]) == [-1]
    assert len(sampler.samples_ns) == 0 and sampler.record(0)["late_start"] is True
