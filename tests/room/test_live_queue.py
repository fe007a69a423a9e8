"""Live profiling one at a time across a server: the lock, the wait, the modes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from workbench.errors import WorkbenchError
from workbench.widgets.latency_support import LiveRuns, _no_room_slot
from workbench.wings import WingMissing
from workbench_room.live_queue import LiveProfilingError, live_mode, live_slot, lock_path


class StepClock:
    """Fake monotonic clock advanced by the injected sleep."""

    def __init__(self):
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def env_for(tmp_path, mode="queue"):
    return {"WORKBENCH_LIVE": mode, "WORKBENCH_LIVE_LOCK": str(tmp_path / "room" / "live.lock")}


def test_modes_and_lock_path(tmp_path):
    assert live_mode({}) == "on"
    assert live_mode({"WORKBENCH_LIVE": " Queue "}) == "queue"
    with pytest.raises(LiveProfilingError, match="'sometimes' is not one of on, queue, off"):
        live_mode({"WORKBENCH_LIVE": "sometimes"})
    assert lock_path(env_for(tmp_path)) == tmp_path / "room" / "live.lock"
    assert issubclass(LiveProfilingError, WorkbenchError)


def test_on_yields_at_once_without_a_lock_and_off_refuses(tmp_path):
    with live_slot(environ=env_for(tmp_path, "on")) as waited:
        assert waited == 0.0
    assert not (tmp_path / "room").exists()
    with pytest.raises(LiveProfilingError, match="live profiling is off on this server"):
        with live_slot(environ=env_for(tmp_path, "off")):
            pass


def test_second_caller_waits_is_told_once_and_times_out(tmp_path):
    env = env_for(tmp_path)
    clock = StepClock()
    told = []
    with live_slot(environ=env, clock=clock) as first_wait:
        assert first_wait == 0.0
        with pytest.raises(LiveProfilingError, match="held the room's profiling slot .* for 1 s"):
            with live_slot(
                environ=env,
                timeout_s=0.95,
                on_wait=lambda: told.append(clock()),
                clock=clock,
                sleep=clock.sleep,
            ):
                pytest.fail("got the slot while another run held it")
    assert told == [100.0]
    assert len(clock.sleeps) == 10 and clock.now == pytest.approx(101.0)
    # released: the next caller gets it at once
    with live_slot(environ=env, timeout_s=0.0, clock=clock) as waited:
        assert waited == 0.0


def test_a_killed_holder_frees_the_slot(tmp_path):
    """A culled kernel (SIGKILL) must not leave the room locked: the OS drops its flock."""
    env = env_for(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from workbench_room.live_queue import live_slot\n"
            f"with live_slot(environ={env!r}):\n    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LiveProfilingError):
            with live_slot(environ=env, timeout_s=0.0):
                pass
    finally:
        holder.kill()
        holder.wait()
    started = time.monotonic()
    with live_slot(environ=env, timeout_s=5.0) as waited:
        assert waited < 5.0
    assert time.monotonic() - started < 5.0


def test_the_explorer_takes_the_room_s_slot_through_the_wing_and_none_without_it(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("WORKBENCH_LIVE", "off")  # the room's queue switched off: the wing refuses
    with pytest.raises(LiveProfilingError, match="live profiling is off"):
        with LiveRuns().slot(on_wait=lambda: None):
            pass
    monkeypatch.delenv("WORKBENCH_LIVE")  # no room: no slot to wait for
    with _no_room_slot(on_wait=None) as waited:
        assert waited == 0.0
    monkeypatch.setenv("WORKBENCH_LIVE", "queue")  # a room's kernel, but the wing cannot load
    monkeypatch.setattr("workbench.wings._entry_points", lambda group: ())
    with pytest.raises(WingMissing, match=r"the room wing, which is not installed"):
        _no_room_slot(on_wait=None)
