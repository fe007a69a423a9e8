"""Python stacks of every timed request: a sampler thread, each sample assigned to its request and stage.

It reads each thread's CPU time by Linux's per-thread clock, with the GIL kept (a file read lets go
of it); the rest and its cost: README "Explain the tail". :func:`assign` gives each sample the
request and stage whose ``[start, end)`` holds its time; ``record`` gives them as ``sampled``.
"""

from __future__ import annotations

import gc
import os
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
from .noise import stat_ticks
from .units import s_to_ns
from .wait_classes import CLASSES, call_kind, classify, portable_file

# 5 ms: every example within a few % of unsampled; 1-2 ms cost more (benchmarks/bench_sampler.py)
DEFAULT_INTERVAL_S = 0.005
MAX_DEPTH = 128
# the innermost frames kept of a paced request waiting to start (the pacer's, mostly)
LATE_DEPTH = 8
# the functions of workbench/timing.py that call the stages (and CudaStageTimer.time_request on CUDA)
ROOT_FUNCTIONS = ("time_request", "_time_request_observed")

Frame = tuple[str, str, int]  # file, function, line being run
ROW_COLUMNS = ("t_ns", "dt_ns", "thread", "stack", "cpu_ns", "rq_ns", "cls", "site", "in_stage")
Counters = tuple[int, int | None]  # ns on CPU, ns runnable but waiting for a core (None: unknown)


def _schedstat_ns(native_id: int) -> Counters:
    with open(f"/proc/self/task/{native_id}/schedstat") as f:
        on_cpu, run_queue = f.read().split()[:2]
    return int(on_cpu), int(run_queue)


_TICK_NS = 1_000_000_000 // (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _stat_ns(native_id: int) -> Counters:
    return stat_ticks(f"/proc/self/task/{native_id}/stat") * _TICK_NS, None


def _thread_clock_ns(native_id: int) -> Counters:
    # the clockid glibc's pthread_getcpuclockid makes from a kernel id (CPUCLOCK_PERTHREAD |
    # CPUCLOCK_SCHED): a thread that ended is an OSError, never a read of freed memory
    if not sys.platform.startswith("linux"):
        raise OSError("thread CPU clocks by kernel id are Linux's")
    return time.clock_gettime_ns(((~native_id) << 3) | 6), None


def thread_cpu_reader() -> tuple[Callable[[int], Counters] | None, str | None]:
    """``(reader, name)``: the first thread CPU counter that works here, or ``(None, None)``."""
    for name, reader in (
        ("thread_clock", _thread_clock_ns),
        ("schedstat", _schedstat_ns),
        ("stat", _stat_ns),
    ):
        try:
            reader(threading.get_native_id())
        except (OSError, ValueError, IndexError, AttributeError):
            continue
        return reader, name
    return None, None


class GcEvents(timing.GcProbe):
    """Collections seen through ``gc.callbacks`` in parallel arrays (start ns, duration, generation,
    triggering thread, objects collected); ``names``: each triggering thread's, taken at once."""

    def __init__(self, clock: Callable[[], int]):
        super().__init__(clock)
        self.start_ns, self.dur_ns = array("q"), array("q")
        self.generation, self.thread, self.collected = array("b"), array("q"), array("q")
        self.names: dict[int, str] = {}  # triggering thread ident -> its name

    def _collected(self, start_ns: int, pause_ns: int, info: dict) -> None:
        self.start_ns.append(start_ns)
        self.dur_ns.append(pause_ns)
        self.generation.append(int(info.get("generation", -1)))
        ident = threading.get_ident()
        self.thread.append(ident)
        if ident not in self.names:
            self.names[ident] = threading.current_thread().name
        self.collected.append(int(info.get("collected", 0)))

    def overlap_ns(self, lo: int, hi: int) -> int:
        """Collection time inside ``(lo, hi]``, one still running included."""
        started = self._started_ns
        total = max(0, hi - max(started, lo)) if started is not None else 0
        # the callback appends start, then duration: read here between the two, the last start has none yet
        for k in range(min(len(self.start_ns), len(self.dur_ns)) - 1, -1, -1):
            s, e = self.start_ns[k], self.start_ns[k] + self.dur_ns[k]
            if e <= lo:
                break
            total += max(0, min(e, hi) - max(s, lo))
        return total


_DUE_NS: dict[int, int] = {}  # thread ident -> its paced request's due time (mark_due)


def mark_due(due_ns: int | None) -> None:
    """The calling thread's next request is due at ``due_ns`` (None: none); past it, outside a
    stage, it is sampled as in ``wait_classes.LATE_STAGE``, classed from the CPU counters alone."""
    ident = threading.get_ident()
    if due_ns is None:
        _DUE_NS.pop(ident, None)
    else:
        _DUE_NS[ident] = due_ns


class StackSampler:
    """Samples the stacks of stages being timed, as a context manager around the timing run:
    ``samples_ns`` and ``sample_stacks`` (parallel arrays) and ``stacks`` (id -> frames)."""

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], int] = time.perf_counter_ns,
        cpu_reader: Callable[[int], Counters] | None | str = "auto",
    ):
        if not interval_s > 0:
            raise ConfigError(f"sample interval must be > 0 seconds, got {interval_s!r}")
        self.interval_s = interval_s
        self._clock = clock
        roots = [getattr(timing, name).__code__ for name in ROOT_FUNCTIONS]
        self._roots = frozenset([*roots, timing.CudaStageTimer.time_request.__code__])
        self._ids: dict[tuple, int] = {}
        self.stacks: list[tuple[Frame, ...]] = []
        self.samples_ns = array("q")
        self.sample_stacks = array("l")
        self.ticks = 0  # wake-ups, whether or not a stage was running
        if cpu_reader == "auto":
            self._cpu_reader, self.cpu_source = thread_cpu_reader()
        else:
            self._cpu_reader, self.cpu_source = cpu_reader, "injected" if cpu_reader else None
        self.rows: dict[str, array] = {c: array("q") for c in ROW_COLUMNS}
        self.thread_names: list[str] = []
        self._thread_index: dict[int, int] = {}  # ident -> index into thread_names
        self._natives: dict[int, int | None] = {}  # ident -> native id
        self._cpu_seen: dict[int, Counters] = {}  # ident -> counters at the previous wake-up
        self._kinds: dict[int, tuple[str | None, int]] = {}  # stack id -> call_kind
        self._last_ns: int | None = None
        self.late_start = False  # a paced request's wait before its first stage was sampled
        self.gc = GcEvents(clock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "StackSampler":
        # first: its start and stop are the nearest to the pause
        gc.callbacks.insert(0, self.gc.callback)
        self._thread = threading.Thread(
            target=self._run, name="workbench-stack-sampler", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.gc.__exit__()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval_s):
            self.sample(me)

    def sample(self, skip_thread: int | None = None) -> None:
        """Take one sample now (the thread calls this; tests call it directly)."""
        t = self._clock()
        dt = t - self._last_ns if self._last_ns is not None else s_to_ns(self.interval_s)
        self._last_ns = t
        self.ticks += 1
        frames = {k: f for k, f in sys._current_frames().items() if k != skip_thread}
        cpu = {ident: self._cpu_delta(ident) for ident in frames}
        gc_ns = self.gc.overlap_ns(t - dt, t)
        for tid, frame in frames.items():
            key = self._stack(frame, self._roots)
            late = key is None and t >= _DUE_NS.get(tid, t + 1)
            if late:  # due and not yet in a stage: how long it was kept from starting, and why
                key, self.late_start = self._stack(frame)[-LATE_DEPTH:], True
            if key is not None:
                sid = self._intern(key)
                if late:
                    kind, site = None, -1
                else:
                    self.samples_ns.append(t)
                    self.sample_stacks.append(sid)
                    kind, site = self._kinds.get(sid) or self._kinds.setdefault(
                        sid, call_kind(self.stacks[sid])
                    )
                # the others' CPU (and run-queue time where read): a thread holding the GIL
                others = sum(v[0] + (v[1] or 0) for k, v in cpu.items() if k != tid and v)
                own, queued = cpu[tid] or (None, None)
                cls = classify(kind, dt, own, others, gc_ns)
                # 2: due and not yet in a stage (the waits match it to late windows only)
                self._row(t, dt, tid, sid, own, queued, cls, site, 2 if late else 1)
            elif cpu[tid] and cpu[tid][0]:  # another thread that ran since the last wake-up
                sid = self._intern(self._stack(frame))
                self._row(t, dt, tid, sid, *cpu[tid], 0, -1, 0)

    def _row(self, *values: int | None) -> None:
        values = (*values[:2], self._thread_of(values[2]), *values[3:])
        for column, value in zip(ROW_COLUMNS, values):
            self.rows[column].append(-1 if value is None else value)

    def _thread_of(self, ident: int, name: str | None = None) -> int:
        found = self._thread_index.get(ident)
        if found is None:
            thread = threading._active.get(ident)  # noqa: SLF001 (ident -> Thread, without locking)
            found = self._thread_index[ident] = len(self.thread_names)
            name = name or (thread.name if thread is not None else f"thread {ident}")
            self.thread_names.append(name)
        return found

    def _cpu_delta(self, ident: int) -> Counters | None:
        """Counters since the previous wake-up (None: no counter, or first seen)."""
        if self._cpu_reader is None:
            return None
        if ident not in self._natives:
            thread = threading._active.get(ident)  # noqa: SLF001
            self._natives[ident] = getattr(thread, "native_id", None)
        native = self._natives[ident]
        try:
            now = self._cpu_reader(native) if native is not None else None
        except (OSError, ValueError, IndexError):  # the thread ended between the two reads
            now = None
        if now is None:
            return None
        before = self._cpu_seen.get(ident)
        self._cpu_seen[ident] = now
        if before is None:
            return None
        queued = None if now[1] is None or before[1] is None else now[1] - before[1]
        return now[0] - before[0], queued

    def record(self, origin_ns: int) -> dict[str, Any]:
        """The samples as ``sampled`` of run.json (docs/json.md), times from ``origin_ns``."""
        frame_ids: dict[Frame, int] = {}
        stacks = [
            [frame_ids.setdefault(f, len(frame_ids)) for f in st] for st in self.portable_stacks()
        ]
        rows = {c: self.rows[c].tolist() for c in ROW_COLUMNS}
        rows["t_ns"] = [v - origin_ns for v in rows["t_ns"]]
        # may name threads: before the list
        gc_threads = [self._thread_of(i, self.gc.names.get(i)) for i in self.gc.thread]
        return {
            "interval_ns": s_to_ns(self.interval_s),
            "cpu_source": self.cpu_source,
            "classes": list(CLASSES),
            "threads": list(self.thread_names),
            "frames": [list(f) for f in frame_ids],
            "stacks": stacks,
            "rows": rows,
            "late_start": self.late_start,
            "gc": {
                "start_ns": [v - origin_ns for v in self.gc.start_ns],
                "dur_ns": self.gc.dur_ns.tolist(),
                "generation": self.gc.generation.tolist(),
                "thread": gc_threads,
                "collected": self.gc.collected.tolist(),
            },
        }

    def _stack(self, frame, roots: frozenset = frozenset()) -> tuple | None:
        """``((code, line), ...)`` below the first of ``roots`` (else None), or the whole stack."""
        out = []
        while frame is not None and len(out) < MAX_DEPTH:
            if frame.f_code in roots:
                return tuple(reversed(out)) or None
            out.append((frame.f_code, frame.f_lineno))
            frame = frame.f_back
        return None if roots else tuple(reversed(out))

    def portable_stacks(self) -> list[tuple[Frame, ...]]:
        """The stacks with portable files (``stacks`` keeps the live ones, to read lines from)."""
        files: dict[str, str] = {}
        return [
            tuple(
                (files.get(f) or files.setdefault(f, portable_file(f)), fn, ln) for f, fn, ln in st
            )
            for st in self.stacks
        ]

    def _intern(self, key: tuple) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.stacks)
            # f_lineno is None on an instruction without a line (3.11+): the function's first
            self.stacks.append(
                tuple(
                    (c.co_filename, c.co_name, c.co_firstlineno if line is None else line)
                    for c, line in key
                )
            )
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
        return Samples([], [], [], sampler.portable_stacks(), sampler.interval_s, int(t.size))
    s, e, req, stage = (np.asarray(c, dtype=np.int64) for c in zip(*sorted(starts)))
    pos = np.searchsorted(s, t, side="right") - 1
    ok = (pos >= 0) & (t < e[np.maximum(pos, 0)])
    pos = pos[ok]
    return Samples(
        req[pos].tolist(),
        [names[k] for k in stage[pos].tolist()],
        ids[ok].tolist(),
        sampler.portable_stacks(),
        sampler.interval_s,
        int((~ok).sum()),
    )
