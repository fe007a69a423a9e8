"""Streaming stages: a stage that yields its answer one unit (a token, a chunk) at a time.

The runner consumes a ``stream=True`` stage's iterable inside its timed region, reading the clock
after each unit (``RequestTiming.unit_ns``, then the run's ``units`` table; TTFT, ITL and TPOT are
:mod:`workbench.analysis.tokens`'). The stages after it run once, on the whole answer (the list of
its units): their time is in end to end, never in TTFT or ITL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd

from .errors import PipelineError
from .record.tables import build_units

Clock = Callable[[], int]


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


def streamed_timer(run_one: Callable, units: UnitClock) -> Callable:
    """``run_one`` whose timings carry the request's unit times (``RequestTiming.unit_ns``)."""

    def run(batch, **kwargs):
        units.take()  # nothing from an abandoned request before this one
        t = run_one(batch, **kwargs)
        t.unit_ns = units.take()
        return t

    return run


def token_sample(t: Any, stream: int | None) -> tuple[int, tuple[int, ...]] | None:
    """``(ttft_ns, gaps_ns)`` of a successful request's units, else None."""
    times = getattr(t, "unit_ns", None)
    if stream is None or t.failure is not None or not times:
        return None
    gaps = tuple(b - a for a, b in zip(times, times[1:]))
    return times[0] - t.start_ns, gaps


def sample_row(t: Any, stream: int | None) -> tuple:
    """``(ok, error_type, ns per stage that ran..., end to end ns, token sample)``."""
    stage_ns = [e - s for s, e in zip(t.stage_start_ns, t.stage_end_ns)]
    error = t.failure and t.failure.error_type
    tokens = token_sample(t, stream)
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
