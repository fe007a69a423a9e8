"""Timing one request, stage by stage: the hot path of every measurement, on an injectable ns clock.

On CUDA each stage is also bracketed by CUDA events; ``sync``: README "How it measures". A
``stream=True`` stage is consumed inside its timed region, the clock read after each unit
(``RequestTiming.unit_ns``; TTFT, ITL, TPOT: :mod:`workbench.analysis.tokens`); the stages after it
run once on the list of its units, so their time is in end to end, never in TTFT or ITL.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .errors import PipelineError, encodable
from .pipeline import exception_where
from .record.tables import build_units
from .units import ms_to_ns

Clock = Callable[[], int]

SYNC_POLICIES = ("stage", "request")


@dataclass(frozen=True)
class StageFailure:
    """A stage that raised: its name, the exception's type and message, and where."""

    stage: str
    error_type: str
    message: str
    where: str | None = None

    def __post_init__(self) -> None:
        # text from user code or from outside goes to tables and run.json
        for name in ("stage", "error_type", "message", "where"):
            if isinstance(text := getattr(self, name), str):
                object.__setattr__(self, name, encodable(text))

    @classmethod
    def from_exception(cls, stage: str, exc: BaseException) -> "StageFailure":
        return cls(stage, type(exc).__name__, str(exc), exception_where(exc))


@dataclass
class RequestTiming:
    """Clock readings (ns) of one request; lists hold one entry per stage that ran."""

    start_ns: int
    end_ns: int
    stage_start_ns: list[int]
    stage_end_ns: list[int]
    device_ns: list[int] | None
    failure: StageFailure | None
    output: Any = None
    stage_gc_ns: list[int] | None = None  # GC pause time inside each stage (a GcProbe was given)
    # outputs of the stages asked for (``keep``): the first request's checks
    kept: dict[int, Any] | None = None
    attributes: dict[int, dict[str, float]] | None = None  # stage index -> its describe= numbers
    # stage index -> "Type: message" of a describe= that raised
    attribute_errors: dict[int, str] | None = None
    # clock after each unit of a streaming stage (UnitClock)
    unit_ns: list[int] | None = None


def collect_set_up_garbage() -> None:
    """A full collection just before the first timed request, unseen by ``gc.callbacks`` (the run's
    probes, a user's too). What the set-up left (the factory's objects, the warm-up's, earlier runs
    in this process) otherwise decides whether CPython owes a full collection, one traversal of the
    whole heap (about 90 ms in a process that has imported torch and pandas), and in which request
    it falls: the tail of a sub-ms pipeline. After it, a full collection inside the run comes from
    what the requests keep, as in a server that has been up a while."""
    callbacks = gc.callbacks[:]
    gc.callbacks.clear()
    try:
        gc.collect()
    finally:
        gc.callbacks[:] = callbacks


PR_SET_TIMERSLACK, PR_GET_TIMERSLACK = 29, 30


@contextlib.contextmanager
def fine_timer_slack() -> Iterator[bool]:
    """The calling thread's timer slack at 1 ns for the block (Linux ``prctl``; yields whether it
    was set): a thread sending on a schedule sleeps until each due time, and with the default
    50-us slack Linux wakes it 74 us late at the median (24 us at 1 ns;
    ``python benchmarks/bench_timer_slack.py``), a lag that is 10-15 % of a sub-ms request."""
    prctl = _prctl()
    old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) if prctl is not None else -1
    done = old > 0 and prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0) == 0
    try:
        yield done
    finally:
        if done:
            prctl(PR_SET_TIMERSLACK, old, 0, 0, 0)


def _prctl():
    """libc's ``prctl`` (None off Linux or where it cannot be loaded)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


class GcProbe:
    """GC pauses through ``gc.callbacks`` while installed (``pause_ns``, ``collections``,
    ``max_pause_ns``): a stage's is the total after it minus before it, two attribute reads."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns):
        self.clock = clock
        self.pause_ns = 0
        self.collections = 0
        self.max_pause_ns = 0
        self._started_ns: int | None = None

    def callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started_ns = self.clock()
        elif self._started_ns is not None:
            pause = self.clock() - self._started_ns
            self.pause_ns += pause
            self.collections += 1
            if pause > self.max_pause_ns:
                self.max_pause_ns = pause
            self._collected(self._started_ns, pause, info)
            self._started_ns = None

    def _collected(self, start_ns: int, pause_ns: int, info: dict) -> None:
        """One collection that ended (``sampling.GcEvents`` keeps each)."""

    def __enter__(self) -> "GcProbe":
        gc.callbacks.append(self.callback)
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(ValueError):  # already removed by someone else: nothing to undo
            gc.callbacks.remove(self.callback)


def time_request(
    names: Sequence[str],
    fns: Sequence[Callable],
    batch: Any,
    clock: Clock = time.perf_counter_ns,
    *,
    starts: list[int] | None = None,
    ends: list[int] | None = None,
    **observe: Any,
) -> RequestTiming:
    """Run the stages on one batch on the host, timing each (ns). Any exception from a stage,
    ``SystemExit`` included, ends the request as its failure; only ``KeyboardInterrupt`` propagates.

    starts/ends: filled in place, so :mod:`workbench.guard` sees which stage runs at a timeout.
    observe: ``gc_probe`` (a :class:`GcProbe`: each stage's GC pause), ``keep`` (stage indexes whose
        outputs are returned in ``kept``), ``describe`` (stage index -> its ``describe=``, called
        after the request's last clock read).
    """
    starts = [] if starts is None else starts
    ends = [] if ends is None else ends
    if observe.get("gc_probe") is not None or observe.get("keep") or observe.get("describe"):
        return _time_request_observed(names, fns, batch, clock, (starts, ends), **observe)
    out = batch
    t0 = clock()
    for fn in fns:
        starts.append(clock())
        try:
            out = fn(out)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # recorded per request (sys.exit too), the run goes on
            ends.append(clock())
            failure = StageFailure.from_exception(names[len(ends) - 1], exc)
            return RequestTiming(t0, clock(), starts, ends, None, failure)
        ends.append(clock())
    return RequestTiming(t0, clock(), starts, ends, None, None, out)


def _time_request_observed(
    names,
    fns,
    batch,
    clock,
    bounds: tuple[list[int], list[int]],
    gc_probe: Any = None,
    keep: frozenset[int] = frozenset(),
    describe: Mapping[int, Callable[[Any], Any]] | None = None,
) -> RequestTiming:
    """:func:`time_request` with ``observe`` (apart, so the plain path stays two reads a stage)."""
    (starts, ends), describe = bounds, describe or {}
    gc_ns: list[int] = []
    kept: dict[int, Any] = {}
    out, failure = batch, None
    t0 = clock()
    for i, fn in enumerate(fns):
        paused = gc_probe.pause_ns if gc_probe is not None else 0
        starts.append(clock())
        try:
            out = fn(out)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # as in time_request
            ends.append(clock())
            gc_ns.append(gc_probe.pause_ns - paused if gc_probe is not None else 0)
            failure = StageFailure.from_exception(names[i], exc)
            break
        ends.append(clock())
        gc_ns.append(gc_probe.pause_ns - paused if gc_probe is not None else 0)
        if i in keep or i in describe:
            kept[i] = out
    t1 = clock()
    gc = gc_ns if gc_probe is not None else None
    timing = RequestTiming(t0, t1, starts, ends, None, failure, None if failure else out, gc)
    return _described(timing, kept, keep, describe)


def _described(
    timing: RequestTiming,
    held: dict[int, Any],
    keep: frozenset[int],
    describe: Mapping[int, Callable],
) -> RequestTiming:
    """``timing`` with the ``describe=`` numbers and the kept outputs (the others released)."""
    numbers: dict[int, dict[str, float]] = {}
    errors: dict[int, str] = {}
    kept = {i: held[i] for i in keep if i in held}
    while held:
        i, value = held.popitem()
        if i in describe:
            try:
                described = dict(describe[i](value)).items()
                numbers[i] = {encodable(str(k)): float(v) for k, v in described}
            # a broken describe= loses its attribute, never the request; it is reported
            except Exception as exc:
                errors[i] = encodable(f"{type(exc).__name__}: {exc}")
        del value
    timing.kept, timing.attributes = kept or None, numbers or None
    timing.attribute_errors = errors or None
    return timing


def stage_timer(
    pipe: Any, clock: Clock = time.perf_counter_ns, sync: str = "stage", **observe: Any
) -> Callable[..., RequestTiming]:
    """``run_one(batch, starts=, ends=)``: one request of ``pipe`` timed (CUDA events on CUDA, else
    :func:`time_request` with ``observe``), a streaming stage's units too."""
    names, fns = pipe.stage_names, [s.fn for s in pipe.stages]
    stream = stream_index(pipe.stages)
    units = UnitClock(clock) if stream is not None else None
    if units is not None:
        fns[stream] = units.wrap(names[stream], fns[stream])
    if pipe.config.is_cuda:
        run_one = functools.partial(CudaStageTimer(len(fns), sync, clock).time_request, names, fns)
    else:
        run_one = functools.partial(time_request, names, fns, clock=clock, **observe)
    if units is None:
        return run_one

    def run(batch, **kwargs):  # the timings carry the request's unit times (RequestTiming.unit_ns)
        units.take()  # nothing from an abandoned request before this one
        t = run_one(batch, **kwargs)
        t.unit_ns = units.take()
        return t

    return run


class CudaStageTimer:
    """Times stages with CUDA events as well as the host clock (see module docstring)."""

    def __init__(self, n_stages: int, sync: str = "stage", clock: Clock = time.perf_counter_ns):
        import torch  # 1-2 s and 300 MB: only a CUDA run times device work

        self._torch = torch
        self._events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(n_stages)
        ]
        self._sync_each = sync == "stage"
        self._clock = clock

    def time_request(
        self,
        names: Sequence[str],
        fns: Sequence[Callable],
        batch: Any,
        *,
        starts: list[int] | None = None,
        ends: list[int] | None = None,
    ) -> RequestTiming:
        """As :func:`time_request`, with device times (ns) from CUDA events."""
        clock, sync = self._clock, self._torch.cuda.synchronize
        starts = [] if starts is None else starts
        ends = [] if ends is None else ends
        failure = None
        out = batch
        sync()  # nothing from before this request may be charged to it
        t0 = clock()
        for i, fn in enumerate(fns):
            begin, end = self._events[i]
            starts.append(clock())
            begin.record()
            try:
                out = fn(out)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # as in time_request: SystemExit is the request's failure
                failure = StageFailure.from_exception(names[i], exc)
            end.record()
            if self._sync_each:
                sync()
            ends.append(clock())
            if failure:
                break
        sync()
        t1 = clock()
        device = [int(round(ms_to_ns(b.elapsed_time(e)))) for b, e in self._events[: len(ends)]]
        return RequestTiming(t0, t1, starts, ends, device, failure, None if failure else out)


class UnitClock:
    """The unit times of the request being run, which :meth:`wrap`'s stage appends to."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.unit_ns: list[int] = []

    def wrap(self, name: str, fn: Callable[[Any], Iterable]) -> Callable[[Any], list]:
        """``fn`` as a plain stage: its units consumed into a list, the clock read after each."""
        clock = self.clock

        def streamed(value: Any) -> list:
            got = fn(value)
            try:
                units = iter(got)
            except TypeError:
                raise PipelineError(
                    f"stage {name!r} is declared stream=True but returned "
                    f"{type(got).__name__}, which is not iterable; yield its units (tokens, chunks)"
                ) from None
            out, times = [], self.unit_ns
            for unit in units:
                times.append(clock())
                out.append(unit)
            return out

        return streamed

    def take(self) -> list[int]:
        """The unit times recorded since the last take (this request's), and a fresh list."""
        got, self.unit_ns = self.unit_ns, []
        return got


def traced_fn(stage: Any) -> Callable[[Any], Any]:
    """The stage's function for the traced run: a stream consumed in its own profiler range."""
    fn = stage.fn
    return (lambda value: list(fn(value))) if stage.stream else fn


def stream_index(stages: Iterable[Any]) -> int | None:
    """The index of the pipeline's streaming stage (``Stage.stream``), None without one."""
    return next((i for i, s in enumerate(stages) if getattr(s, "stream", False)), None)


def sample_row(t: Any, stream: int | None) -> tuple:
    """``(ok, error_type, ns per stage that ran..., end to end ns, token sample)``; the token
    sample: ``(ttft_ns, gaps_ns)`` of a successful request's units, else None."""
    stage_ns = [e - s for s, e in zip(t.stage_start_ns, t.stage_end_ns)]
    error = t.failure and t.failure.error_type
    times = getattr(t, "unit_ns", None)
    tokens = None
    if stream is not None and t.failure is None and times:
        tokens = times[0] - t.start_ns, tuple(b - a for a, b in zip(times, times[1:]))
    return (t.failure is None, error, *stage_ns, t.end_ns - t.start_ns, tokens)


def units_table(stages: Sequence[Any], timings: Sequence[Any]) -> pd.DataFrame | None:
    """The run's ``units`` table, times from the first request's start; None without a stream."""
    stream = stream_index(stages)
    if stream is None:
        return None
    name, origin = stages[stream].name, timings[0].start_ns if timings else 0
    return build_units(
        (i, name, k, at - origin)
        for i, t in enumerate(timings)
        for k, at in enumerate(t.unit_ns or ())
    )
