"""Python stacks of every timed request: a sampler thread, and each sample assigned to its request and stage.

The timing run keeps its two clock reads per stage; beside it a daemon thread
wakes every ``interval_s`` (5 ms by default), reads the clock and every
thread's current frame (``sys._current_frames``), and keeps the stack of the
thread that is inside a stage: the frames from the stage function down to the
running one, found by walking up to the timing function that called the stage
(:data:`ROOT_FUNCTIONS`). Frames above it (runpy, the CLI, the runner, the
guard) are never recorded, so the harness cannot enter a stage's stacks.

A sample is ``(t_ns, stack id)``; stacks are interned (one tuple of frames per
distinct stack, a frame being ``(file, function, line)``). After the run,
:func:`assign` gives each sample its request and stage from the timing run's
own clock readings: the sample whose time falls in ``[stage start, stage
end)`` of a request belongs to that request and stage (the sampler reads the
same ``time.perf_counter_ns``). Samples are evenly spaced in time, so a
frame's share of a set's samples is its share of the set's time.

A stage that runs Python without releasing the GIL is sampled when the
interpreter hands the GIL over (``sys.getswitchinterval()``, 5 ms), so such
stages get fewer samples than their time suggests; stages waiting on I/O,
sleeping or inside torch, PIL or NumPy calls release it and are sampled on time.

Why a thread and not pyinstrument's ``setstatprofile``: the hook runs on every
call and return of the timed code, the thread only every interval
(``benchmarks/bench_sampler.py`` measures both; ``benchmarks/results/sampler.md``).
Turn it off with ``profile(..., sample_stacks=False)`` or ``--no-sample-stacks``.
"""

from __future__ import annotations

import sys
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import timing
from .errors import ConfigError

# benchmarks/bench_sampler.py (interleaved, 3 examples): at 1 and 2 ms the tabular example paid +6 to +8 %;
# at 5 ms every example stayed within +4 % (text and image within +-3 %)
DEFAULT_INTERVAL_S = 0.005
MAX_DEPTH = 128
# the functions of workbench/timing.py that call the stages (and CudaStageTimer.time_request on CUDA)
ROOT_FUNCTIONS = ("time_request", "_time_request_observed")

Frame = tuple[str, str, int]  # file, function, line being run


def _root_codes() -> frozenset:
    codes = [getattr(timing, name).__code__ for name in ROOT_FUNCTIONS]
    return frozenset([*codes, timing.CudaStageTimer.time_request.__code__])


class StackSampler:
    """Samples the stacks of stages being timed, from a daemon thread (see module docstring).

    Use as a context manager around the timing run; ``samples_ns`` and ``sample_stacks`` (parallel
    arrays) and ``stacks`` (id -> frames, stage function first) hold what it saw.
    """

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], int] = time.perf_counter_ns,
        roots: frozenset | None = None,
    ):
        if not interval_s > 0:
            raise ConfigError(f"sample interval must be > 0 seconds, got {interval_s!r}")
        self.interval_s = interval_s
        self._clock = clock
        self._roots = roots if roots is not None else _root_codes()
        self._ids: dict[tuple, int] = {}
        self.stacks: list[tuple[Frame, ...]] = []
        self.samples_ns = array("q")
        self.sample_stacks = array("l")
        self.ticks = 0  # wake-ups, whether or not a stage was running
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "StackSampler":
        self._thread = threading.Thread(
            target=self._run, name="workbench-stack-sampler", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval_s):
            self.sample(me)

    def sample(self, skip_thread: int | None = None) -> None:
        """Take one sample now (the thread calls this; tests call it directly)."""
        t = self._clock()
        self.ticks += 1
        for tid, frame in sys._current_frames().items():
            if tid == skip_thread:
                continue
            key = self._stage_stack(frame)
            if key is not None:
                self.samples_ns.append(t)
                self.sample_stacks.append(self._intern(key))

    def _stage_stack(self, frame) -> tuple | None:
        """``((code, line), ...)`` from the stage function down, or None when no stage is running here."""
        out = []
        while frame is not None and len(out) < MAX_DEPTH:
            if frame.f_code in self._roots:
                return tuple(reversed(out)) if out else None
            out.append((frame.f_code, frame.f_lineno))
            frame = frame.f_back
        return None

    def _intern(self, key: tuple) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.stacks)
            self.stacks.append(tuple((c.co_filename, c.co_name, line) for c, line in key))
        return found


@dataclass(frozen=True)
class Samples:
    """Assigned samples: parallel lists ``request``, ``stage`` and ``stack`` (ids into ``stacks``)."""

    request: list[int]
    stage: list[str]
    stack: list[int]
    stacks: list[tuple[Frame, ...]]
    interval_s: float
    unassigned: int  # samples taken between stages or requests (the runner's own time)


def assign(sampler: StackSampler, timings: list[Any], names: list[str]) -> Samples:
    """Each sample's request (its index in ``timings``) and stage, from the timings' clock readings."""
    t = np.asarray(sampler.samples_ns, dtype=np.int64)
    ids = np.asarray(sampler.sample_stacks, dtype=np.int64)
    starts = [
        (s, e, i, k)
        for i, tm in enumerate(timings)
        for k, (s, e) in enumerate(zip(tm.stage_start_ns, tm.stage_end_ns))
    ]
    if not starts or not t.size:
        return Samples([], [], [], list(sampler.stacks), sampler.interval_s, int(t.size))
    s, e, req, stage = (np.asarray(c, dtype=np.int64) for c in zip(*sorted(starts)))
    pos = np.searchsorted(s, t, side="right") - 1
    ok = (pos >= 0) & (t < e[np.maximum(pos, 0)])
    pos = pos[ok]
    return Samples(
        req[pos].tolist(),
        [names[k] for k in stage[pos].tolist()],
        ids[ok].tolist(),
        list(sampler.stacks),
        sampler.interval_s,
        int((~ok).sum()),
    )
