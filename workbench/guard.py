"""Running a request's stages so that a stage cannot hang the tool.

A Python thread cannot be killed, so with ``timeout_s`` the stages run on a daemon thread
(:class:`StageGuard`): past it the request is a ``Timeout`` failure at the running stage, the thread
is abandoned and the run stops. Without a timeout the stage timer is called directly.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .errors import ConfigError, WorkbenchError, is_number
from .timing import Clock, RequestTiming, StageFailure

TIMEOUT = "Timeout"  # error_type of a request abandoned after timeout_s
POLL_S = 0.05  # how often a waiting caller looks at the cancel event (s)

RunOne = Callable[..., RequestTiming]  # run_one(batch, starts=[], ends=[]) -> RequestTiming
STAGE_THREAD_NAMES = ("workbench-stages", "workbench-executor-")  # threads running stages


def stage_threads_alive() -> list[threading.Thread]:
    """Live threads running stages: at a command's end, abandoned ones (``cli.entry``)."""
    return [
        t
        for t in threading.enumerate()
        if t.daemon and t.is_alive() and t.name.startswith(STAGE_THREAD_NAMES)
    ]


class Cancelled(WorkbenchError):
    """The run was cancelled (``cancel.is_set()`` became true)."""


class StageTimeout(WorkbenchError):
    """A stage did not return in time where no request can be recorded (a load run's warm-up)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run; ``run`` holds what was measured until then (status ``interrupted``)."""

    def __init__(self, run: Any, message: str = "interrupted"):
        super().__init__(message)
        self.run = run


def check_timeout(timeout_s: float | None) -> float | None:
    """``timeout_s``: None (no timeout) or a positive number of seconds, as a float."""
    if timeout_s is None:
        return None
    if not (is_number(timeout_s) and timeout_s > 0):
        raise ConfigError(
            f"timeout_s must be a number of seconds > 0 (or None for no timeout), got {timeout_s!r}"
        )
    return float(timeout_s)


def is_timeout(timing: RequestTiming) -> bool:
    """True when this request was abandoned after the per-request timeout."""
    return timing.failure is not None and timing.failure.error_type == TIMEOUT


@contextlib.contextmanager
def guarded(
    run_one: RunOne,
    names: Sequence[str],
    timeout_s: float | None,
    *,
    clock: Clock,
    cancel: Any = None,
) -> Iterator[RunOne]:
    """``run_one`` itself without a timeout (the fast path), else a :class:`StageGuard` around it."""
    if timeout_s is None:
        yield run_one
        return
    guard = StageGuard(run_one, names, timeout_s, clock=clock, cancel=cancel)
    try:
        yield guard
    finally:
        guard.close()


class StageGuard:
    """Runs ``run_one(batch, starts=..., ends=...)`` on a worker thread with a per-request deadline
    of ``timeout_s`` real seconds; ``cancel`` (``is_set()``) abandons it with :class:`Cancelled`.
    After either, ``stuck_stage`` names the stage left running and later calls raise Cancelled."""

    def __init__(
        self,
        run_one: RunOne,
        names: Sequence[str],
        timeout_s: float,
        *,
        clock: Clock = time.perf_counter_ns,
        cancel: Any = None,
        thread_init: Callable[[], Any] | None = None,
    ):
        self.timeout_s = check_timeout(timeout_s)
        self.names, self.clock, self.cancel = list(names), clock, cancel
        self.stuck_stage: str | None = None
        self._ends: list[int] = []  # the current request's stage ends, filled by the worker
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        init = _inherit_thread_state(thread_init)
        self._thread = threading.Thread(
            target=self._work, args=(run_one, init), name="workbench-stages", daemon=True
        )
        self._thread.start()

    def __call__(
        self, batch: Any, starts: list[int] | None = None, ends: list[int] | None = None
    ) -> RequestTiming:
        """One request; ``starts``/``ends``: the stage timer's lists, to watch from a third thread."""
        if self.stuck_stage is not None:
            raise Cancelled(
                f"stage {self.stuck_stage!r} of an earlier request is still running; start a new run"
            )
        starts = [] if starts is None else starts
        ends = [] if ends is None else ends
        done, box = threading.Event(), []
        submitted = self.clock()
        self._ends = ends
        self._jobs.put((batch, starts, ends, done, box))
        if not self._wait(done):
            return self._abandon(starts, ends, submitted)
        kind, value = box[0]
        if kind == "raise":
            raise value
        return value

    def close(self) -> None:
        """Let the worker thread end (at once if idle, else when its stage returns)."""
        self._jobs.put(None)

    def _wait(self, done: threading.Event) -> bool:
        """Wait for the request; False past the deadline, Cancelled if cancel is set."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if done.wait(min(POLL_S, max(left, 0.0))):
                return True
            if self.cancel is not None and self.cancel.is_set():
                stage = self.names[min(len(self._ends), len(self.names) - 1)]
                self.stuck_stage = stage
                self.close()
                raise Cancelled(
                    f"cancelled while stage {stage!r} was running; its thread was abandoned "
                    "and may still be running (a Python thread cannot be stopped)"
                )
            if left <= 0:
                return False

    def _abandon(self, starts: list[int], ends: list[int], submitted: int) -> RequestTiming:
        """The timed-out request as a failure at the running stage; the worker is left to itself."""
        late = f"{self.timeout_s:g} s per-request timeout; its thread was abandoned"
        message = lambda stage: f"stage {stage!r} still running after the {late}"
        timing = abandoned(self.names, starts, ends, submitted, self.clock(), message)
        self.stuck_stage = timing.failure.stage
        self.close()
        return timing

    def _work(self, run_one: RunOne, init: Callable[[], Any]) -> None:
        initialised = False
        while True:
            job = self._jobs.get()
            if job is None:
                return
            batch, starts, ends, done, box = job
            try:
                if not initialised:
                    init()
                    initialised = True
                box.append(("ok", run_one(batch, starts=starts, ends=ends)))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                box.append(("raise", exc))
            done.set()


def abandoned(
    names: Sequence[str],
    starts: list[int],
    ends: list[int],
    since_ns: int,
    now_ns: int,
    message: Callable[[str], str],
) -> RequestTiming:
    """A request left running, as a ``Timeout`` failure at its stage lasting until ``now_ns``
    (``ends`` read before ``starts``: the running thread may still be filling both)."""
    e = list(ends)
    s = list(starts)[: len(e) + 1]
    stage = names[min(len(e), len(names) - 1)]
    if len(s) > len(e):
        e.append(now_ns)
    return RequestTiming(
        s[0] if s else since_ns, now_ns, s, e, None, StageFailure(stage, TIMEOUT, message(stage))
    )


def _inherit_thread_state(thread_init: Callable[[], Any] | None) -> Callable[[], None]:
    """The worker's init: the caller's torch threads and CUDA device, then ``thread_init``."""
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    device = (
        torch.cuda.current_device() if torch is not None and torch.cuda.is_initialized() else None
    )

    def init() -> None:
        if threads is not None:
            torch.set_num_threads(threads)
        if device is not None:
            torch.cuda.set_device(device)
        if thread_init is not None:
            thread_init()

    return init
