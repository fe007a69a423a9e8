"""Stages that cannot hang, crash or leak the tool: timeout, BaseException, Ctrl-C, cancel, scratch folders."""

from __future__ import annotations

import functools
import itertools
import sys
import tempfile
import threading
import time

import pytest

from tests.conftest import FakeClock
from workbench import Pipeline, profile
from workbench.errors import ConfigError
from workbench.record import load_run
from workbench.guard import TIMEOUT, Cancelled, Interrupted, StageGuard, check_timeout
from workbench.runner import Cancelled as RunnerCancelled
from workbench.timing import time_request

RELEASE = threading.Event()  # set at teardown: abandoned stage threads end


@pytest.fixture(autouse=True)
def release_stuck_threads():
    RELEASE.clear()
    yield
    RELEASE.set()


@pytest.fixture
def scratch_root(tmp_path, monkeypatch):
    """tempfile's folder pointed at tmp_path, to count the runner's leftover scratch folders."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def leftovers(root) -> list[str]:
    return sorted(p.name for p in root.glob("workbench-trace-*"))


def pipeline(
    clock: FakeClock,
    hang_at: int | None = None,
    exit_odd: bool = False,
    interrupt_at: int | None = None,
    on_item: dict | None = None,
    hang_s: float = 60.0,
) -> Pipeline:
    """parse (1 µs) -> forward (2 µs): hangs (until RELEASE, at most hang_s), sys.exits or raises
    KeyboardInterrupt on chosen items."""
    pipe = Pipeline("guarded", items=lambda: itertools.count())

    @pipe.stage
    def parse(batch):
        clock.advance(1_000)
        return batch

    @pipe.stage
    def forward(batch):
        clock.advance(2_000)
        item = batch[0]
        (on_item or {}).get(item, lambda: None)()
        if hang_at is not None and item >= hang_at:
            RELEASE.wait(hang_s)
        if exit_odd and item % 2:
            sys.exit(0)
        if interrupt_at is not None and item >= interrupt_at:
            raise KeyboardInterrupt
        return batch

    return pipe


def runner_of(clock, pipe):
    names, fns = pipe.stage_names, [s.fn for s in pipe.stages]
    return functools.partial(time_request, names, fns, clock=clock), names


# -- StageGuard ---------------------------------------------------------------


def test_guard_returns_the_same_exact_timings_as_a_direct_call():
    clock = FakeClock(start_ns=0)
    run_one, names = runner_of(clock, pipeline(clock))
    guard = StageGuard(run_one, names, 5.0, clock=clock)
    try:
        t = guard([7])
    finally:
        guard.close()
    assert (t.start_ns, t.end_ns, t.stage_start_ns, t.stage_end_ns) == (
        0,
        3_000,
        [0, 1_000],
        [1_000, 3_000],
    )
    assert t.failure is None and t.output == [7]


def test_timeout_is_a_failure_at_the_stuck_stage_and_the_thread_is_abandoned():
    clock = FakeClock(start_ns=0)
    run_one, names = runner_of(clock, pipeline(clock, hang_at=0))
    guard = StageGuard(run_one, names, 0.2, clock=clock)
    began = time.monotonic()
    t = guard([0])
    waited = time.monotonic() - began
    assert 0.2 <= waited < 2.0
    assert (t.failure.stage, t.failure.error_type) == ("forward", TIMEOUT)
    assert (
        t.failure.message
        == "stage 'forward' still running after the 0.2 s per-request timeout; its thread was abandoned"
    )
    assert (t.start_ns, t.end_ns, t.stage_start_ns, t.stage_end_ns) == (
        0,
        3_000,
        [0, 1_000],
        [1_000, 3_000],
    )
    assert guard.stuck_stage == "forward"
    assert guard._thread.daemon and guard._thread.is_alive()
    with pytest.raises(Cancelled, match="stage 'forward' of an earlier request is still running"):
        guard([1])
    RELEASE.set()
    guard._thread.join(5)
    assert not guard._thread.is_alive()  # close() was sent: it ends once its stage returns


def test_cancel_while_a_stage_hangs_raises_at_once_and_names_the_stage():
    clock = FakeClock(start_ns=0)
    run_one, names = runner_of(clock, pipeline(clock, hang_at=0))
    cancel = threading.Event()
    guard = StageGuard(run_one, names, 30.0, clock=clock, cancel=cancel)
    threading.Timer(0.1, cancel.set).start()
    began = time.monotonic()
    with pytest.raises(
        Cancelled, match="cancelled while stage 'forward' was running; its thread was abandoned"
    ):
        guard([0])
    assert time.monotonic() - began < 2.0
    assert guard.stuck_stage == "forward"


def test_keyboard_interrupt_raised_by_a_stage_reaches_the_caller():
    clock = FakeClock(start_ns=0)
    run_one, names = runner_of(clock, pipeline(clock, interrupt_at=0))
    guard = StageGuard(run_one, names, 5.0, clock=clock)
    with pytest.raises(KeyboardInterrupt):
        guard([0])
    guard.close()


def test_worker_thread_runs_with_the_callers_torch_thread_count():
    torch = pytest.importorskip("torch")
    seen = []
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        guard = StageGuard(
            lambda batch, **lists: (
                seen.append(torch.get_num_threads())
                or time_request(["s"], [lambda x: x], batch, **lists)
            ),
            ["s"],
            5.0,
        )
        guard(None)
        guard.close()
    finally:
        torch.set_num_threads(before)
    assert seen == [1]


@pytest.mark.parametrize("bad", [0, -1.0, "5", True, float("nan")])
def test_timeout_must_be_positive_seconds(bad):
    with pytest.raises(ConfigError, match="timeout_s must be a number of seconds > 0"):
        check_timeout(bad)
    assert check_timeout(None) is None and check_timeout(2) == 2.0


# -- profile(): the run around it -----------------------------------------------


def test_profile_timeout_stops_and_returns_the_run_marked_incomplete(fake_clock):
    fake_clock.now = 0
    run = profile(
        pipeline(fake_clock, hang_at=3),
        requests=10,
        warmup=1,
        traced=3,
        timeout_s=0.2,
        clock=fake_clock,
        max_duration_s=None,
    )
    assert run.meta.status == "incomplete: timeout"
    req = run.requests
    assert list(req["request"]) == [0, 1, 2, 3]
    assert list(req["ok"]) == [True, True, True, False]
    assert list(req["start_ns"]) == [0, 3_000, 6_000, 9_000] and list(req["dur_ns"]) == [3_000] * 4
    last = req.iloc[-1]
    assert (last["error_stage"], last["error_type"]) == ("forward", "Timeout")
    stuck = run.stages[run.stages["request"] == 3]
    assert list(stuck["stage"]) == ["parse", "forward"] and list(stuck["dur_ns"]) == [1_000, 2_000]
    assert run.trace_path is None  # no traced run after a timeout


def test_a_timeout_during_warm_up_is_a_run_saved_incomplete(fake_clock, tmp_path):
    # issue 35: no RSS reading after warm-up, memory.summary() None, and the run was refused
    # ("field 'memory' must be an object, got None", exit 2) instead of saved 'incomplete: timeout'
    fake_clock.now = 0
    run = profile(
        pipeline(fake_clock, hang_at=1),
        requests=10,
        warmup=3,
        traced=2,
        timeout_s=0.2,
        clock=fake_clock,
        max_duration_s=None,
    )
    assert run.meta.status == "incomplete: timeout" and run.meta.memory is None
    assert list(run.requests["warmup"]) == [True, True] and list(run.requests["ok"]) == [
        True,
        False,
    ]
    assert load_run(run.save(tmp_path / "run")).meta.status == "incomplete: timeout"


def test_an_interrupt_during_warm_up_keeps_the_warm_up_requests(fake_clock, tmp_path):
    with pytest.raises(Interrupted) as stop:
        profile(pipeline(fake_clock, interrupt_at=2), requests=10, warmup=3, clock=fake_clock)
    run = stop.value.run
    assert run.meta.status == "interrupted" and list(run.requests["warmup"]) == [True, True]
    assert len(load_run(run.save(tmp_path / "run")).requests) == 2


def test_profile_without_timeout_records_sys_exit_and_goes_on(fake_clock, scratch_root):
    run = profile(
        pipeline(fake_clock, exit_odd=True), requests=6, warmup=0, traced=2, clock=fake_clock
    )
    assert run.meta.status == "complete"
    assert list(run.requests["ok"]) == [True, False] * 3
    assert set(run.requests["error_type"].dropna()) == {"SystemExit"}
    assert run.meta.trace.failed_requests == 1  # traced items 6, 7, 8: item 7 exits
    assert run.meta.trace.failures[0]["type"] == "SystemExit"
    run.close()
    assert leftovers(scratch_root) == []


def test_keyboard_interrupt_in_the_timing_run_keeps_what_was_measured(fake_clock, scratch_root):
    with pytest.raises(Interrupted) as stop:
        profile(
            pipeline(fake_clock, interrupt_at=4), requests=10, warmup=1, traced=2, clock=fake_clock
        )
    run = stop.value.run
    assert isinstance(stop.value, KeyboardInterrupt)
    assert run.meta.status == "interrupted"
    assert list(run.requests["request"]) == [0, 1, 2, 3]
    assert run.trace_path is None and leftovers(scratch_root) == []


def test_keyboard_interrupt_in_the_traced_run_keeps_the_timing_run_and_no_scratch(
    fake_clock, scratch_root
):
    with pytest.raises(
        Interrupted
    ) as stop:  # items 0-4 timed; the traced run's second item (6) interrupts
        profile(
            pipeline(fake_clock, interrupt_at=6), requests=5, warmup=0, traced=3, clock=fake_clock
        )
    run = stop.value.run
    assert run.meta.status == "interrupted"
    assert len(run.requests) == 5 and run.requests["ok"].all()
    assert run.trace_path is None
    assert leftovers(scratch_root) == []


def test_cancel_during_the_traced_run_leaves_no_scratch_folder(fake_clock, scratch_root):
    cancel = threading.Event()
    with pytest.raises(RunnerCancelled, match="cancelled during the traced run"):
        profile(
            pipeline(fake_clock, on_item={5: cancel.set}),
            requests=4,
            warmup=0,
            traced=3,
            clock=fake_clock,
            cancel=cancel,
        )
    assert leftovers(scratch_root) == []


def test_timeout_argument_is_checked_before_anything_runs(fake_clock):
    with pytest.raises(ConfigError, match="timeout_s"):
        profile(pipeline(fake_clock), requests=1, traced=0, timeout_s=0)


# -- the command line -------------------------------------------------------------


def build(config):
    """Factory for the CLI tests: ``--option mode=hang|exit``. The CLI imports this file as a second
    module whose RELEASE nobody sets, so its hang ends by itself after 3 s."""
    mode = config.options.get("mode")
    return pipeline(
        FakeClock(), hang_at=2 if mode == "hang" else None, exit_odd=mode == "exit", hang_s=3.0
    )


def test_cli_timeout_saves_an_incomplete_run_and_exits_1(tmp_path, capsys):
    import json

    from workbench.cli import main

    out = tmp_path / "run"
    code = main(
        [
            "profile",
            "--closed-loop",
            "--pipeline",
            "tests.test_guard:build",
            "--option",
            "mode=hang",
            "--requests",
            "5",
            "--warmup",
            "0",
            "--traced",
            "0",
            "--timeout-s",
            "0.2",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert (
        "request 2 timed out: stage 'forward' still running after the 0.2 s per-request timeout"
        in err
    )
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "incomplete: timeout"


def test_cli_stage_calling_sys_exit_is_a_recorded_failure_not_a_silent_exit(tmp_path, capsys):
    from workbench.cli import main
    from workbench.record import load_run

    out = tmp_path / "run"
    code = main(
        [
            "profile",
            "--closed-loop",
            "--pipeline",
            "tests.test_guard:build",
            "--option",
            "mode=exit",
            "--requests",
            "4",
            "--warmup",
            "0",
            "--traced",
            "0",
            "--out",
            str(out),
        ]
    )
    assert code in (
        0,
        1,
    )  # 1 only where a measured-failure policy says so; never a silent 0 without a run
    assert "run written to" in capsys.readouterr().out
    run = load_run(out)
    assert list(run.requests["error_type"]) == [None, "SystemExit", None, "SystemExit"]


SLOW_PIPELINE = """
import itertools, pathlib, time
from workbench import Pipeline

def build(config):
    marker = pathlib.Path(config.options["marker"])
    pipe = Pipeline("slow", items=lambda: itertools.count())

    @pipe.stage
    def forward(batch):
        time.sleep(0.01)
        if batch[0] == 20:
            marker.write_text("measuring")
        return batch
    return pipe
"""


def test_cli_ctrl_c_saves_the_measured_requests_and_exits_130(tmp_path):
    import json
    import signal

    from tests.conftest import sigint_as_from_a_terminal
    from tests.support.cli import started

    (tmp_path / "slow.py").write_text(SLOW_PIPELINE)
    marker, out, scratch = tmp_path / "marker", tmp_path / "run", tmp_path / "tmp"
    scratch.mkdir()
    proc = started(
        *["profile", "--closed-loop", "--pipeline", f"{tmp_path}/slow.py:build"],
        *["--option", f"marker={marker}", "--requests", "100000", "--warmup", "0", "--out", out],
        env={"TMPDIR": str(scratch)},
        preexec_fn=sigint_as_from_a_terminal,
    )
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "run written to" in err and "(status: interrupted)" in err
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["timing"]["requests"] >= 21
    assert leftovers(scratch) == []


# -- load: the warm-up wait honours the drain timeout ----------------------------------


def test_load_returns_at_the_drain_timeout_when_a_stage_hangs_in_warm_up():
    from workbench.batching.arrivals import Arrivals
    from workbench.batching.live import run_load
    from workbench.batching.policy import BatchPolicy
    from workbench.guard import StageTimeout

    began = time.monotonic()
    with pytest.raises(
        StageTimeout, match=r"executor warm-up still running after 0.5 s .*1 of 1 executor threads"
    ):
        run_load(
            pipeline(FakeClock(), hang_at=0),
            arrivals=Arrivals("poisson", rate_rps=100, count=5, seed=0),
            policy=BatchPolicy(2, 1.0),
            warmup=1,
            drain_timeout_s=0.5,
        )
    assert time.monotonic() - began < 3.0  # was 600 s of warm-up wait, then 30 s per executor join


def test_ctrl_c_after_the_traced_run_still_removes_its_scratch_folder(
    fake_clock, scratch_root, monkeypatch
):
    import workbench.runner as runner

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "environment", interrupted)  # run while the run's meta is built
    with pytest.raises(KeyboardInterrupt):
        profile(pipeline(fake_clock), requests=2, warmup=0, traced=1, clock=fake_clock)
    assert leftovers(scratch_root) == []


def test_a_stage_that_hangs_only_in_the_traced_run_is_stopped_and_the_timing_run_kept():
    """The traced run runs on the main thread (torch.profiler records no other thread): a SIGALRM stops it."""
    import itertools
    import time as _time

    from workbench import Pipeline, profile

    calls = itertools.count()
    pipe = Pipeline("hangs-when-traced", items=lambda: itertools.repeat(1))

    @pipe.stage
    def work(batch):
        if next(calls) >= 3:  # the timing run makes 3 calls; the traced run's first call hangs
            _time.sleep(60)
        return batch

    started = _time.perf_counter()
    run = profile(pipe, requests=3, warmup=0, traced=2, timeout_s=0.5)
    assert _time.perf_counter() - started < 10
    assert run.meta.status == "incomplete: timeout" and run.trace_path is None
    assert len(run.requests) == 3 and run.requests["ok"].all()
    failure = run.meta.trace.failures[0]
    assert (
        failure["type"] == "Timeout"
        and failure["stage"] == "work"
        and "traced run" in failure["message"]
    )
