"""Timing one request, stage by stage: the hot path of every measurement.

Host wall time comes from an injectable clock (``time.perf_counter_ns`` by
default; tests pass a fake). On CUDA, each stage is also bracketed by a pair of
CUDA events, which time the device work the stage enqueued.

Synchronization policy on CUDA (``sync``):

* ``"stage"`` (default): ``torch.cuda.synchronize()`` after every stage, so a
  stage's host time includes the device work it launched and nothing is
  charged to the next stage. Costs the overlap between one stage's GPU work
  and the next stage's host work (a server that overlaps them may be a little
  faster end to end).
* ``"request"``: one synchronize at the end of the request. Stage host times
  then measure only launching (the wrong way the notebooks teach); device
  times from the events are still right; end to end includes the GPU tail.

The instrumentation costs two clock reads and two list appends per stage
(``benchmarks/bench_overhead.py`` measures it).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Clock = Callable[[], int]
SYNC_POLICIES = ("stage", "request")


@dataclass(frozen=True)
class StageFailure:
    """A stage that raised: which stage, the exception type and message."""

    stage: str
    error_type: str
    message: str


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


def time_request(names: Sequence[str], fns: Sequence[Callable], batch: Any, clock: Clock = time.perf_counter_ns) -> RequestTiming:
    """Run the stages on one batch on the host, timing each; a raising stage ends the request."""
    starts: list[int] = []
    ends: list[int] = []
    out = batch
    t0 = clock()
    for fn in fns:
        starts.append(clock())
        try:
            out = fn(out)
        except Exception as exc:  # recorded per request, the run goes on
            ends.append(clock())
            failure = StageFailure(names[len(ends) - 1], type(exc).__name__, str(exc))
            return RequestTiming(t0, clock(), starts, ends, None, failure)
        ends.append(clock())
    return RequestTiming(t0, clock(), starts, ends, None, None, out)


class CudaStageTimer:
    """Times stages with CUDA events as well as the host clock (see module docstring)."""

    def __init__(self, n_stages: int, sync: str = "stage", clock: Clock = time.perf_counter_ns):
        import torch

        if sync not in SYNC_POLICIES:
            from .errors import ConfigError

            raise ConfigError(f"sync must be one of {', '.join(SYNC_POLICIES)}, got {sync!r}")
        self._torch = torch
        self._events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n_stages)]
        self._sync_each = sync == "stage"
        self._clock = clock

    def time_request(self, names: Sequence[str], fns: Sequence[Callable], batch: Any) -> RequestTiming:
        clock, sync = self._clock, self._torch.cuda.synchronize
        starts: list[int] = []
        ends: list[int] = []
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
            except Exception as exc:
                failure = StageFailure(names[i], type(exc).__name__, str(exc))
            end.record()
            if self._sync_each:
                sync()
            ends.append(clock())
            if failure:
                break
        sync()
        t1 = clock()
        device = [int(round(b.elapsed_time(e) * 1e6)) for b, e in self._events[: len(ends)]]
        return RequestTiming(t0, t1, starts, ends, device, failure, None if failure else out)
