"""A live load run: open-loop arrivals into the dynamic batcher in front of a real pipeline.

The pipeline is built for ``max_batch_size`` and called once per batch (1 to
``max_batch_size`` items). Everything runs in this process: the generator on
the calling thread, the batcher and executors on their own threads; nothing
goes over a socket. A run is bounded: the schedule by its count and/or
duration, the drain after the last arrival by ``drain_timeout_s``; requests
still queued at that deadline are recorded as failed (``error_stage``
``"batcher"``, ``DrainTimeout``), never dropped silently.

The result is a :class:`workbench.record.Run` in the profiler's folder format
(``kind: "load"``), so ``load_run``, ``budget`` and ``workbench show`` read
it: its stages are ``batch_wait``, ``queue_wait`` and then the pipeline's.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..config import PipelineConfig
from ..errors import ConfigError, PipelineError
from ..record import Run
from ..timing import Clock, CudaStageTimer, time_request
from .arrivals import Arrivals
from .batcher import DynamicBatcher
from .loadgen import generate, lag_summary
from .policy import BatchPolicy
from .records import load_tables
from .summary import load_summary

LEAD_NS = 2_000_000  # the schedule starts 2 ms after the threads are up
MAX_REQUESTS = 1_000_000  # a live run holds every item and record in memory


def run_load(target, config: PipelineConfig | None = None, *, arrivals: Arrivals, policy: BatchPolicy,
             warmup: int = 5, drain_timeout_s: float = 10.0, switch_interval_s: float | None = None,
             clock: Clock = time.perf_counter_ns, sleep=time.sleep) -> Run:
    """Run the load and return the (unsaved) run.

    target: a Pipeline, a factory or an example name (as ``workbench.profile``).
    warmup: untimed pipeline calls at sizes ``max_batch_size`` and 1 (each), run by every
        executor thread before the first arrival.
    switch_interval_s: if set, ``sys.setswitchinterval`` for the run (restored after).
    """
    from ..runner import environment, resolve_pipeline

    if not (isinstance(drain_timeout_s, (int, float)) and drain_timeout_s > 0):
        raise ConfigError(f"drain_timeout_s must be > 0 seconds, got {drain_timeout_s!r}")
    cfg = (config or PipelineConfig()).replace(batch_size=policy.max_batch_size)
    pipe = resolve_pipeline(target, cfg)
    schedule = arrivals.times_ns()
    if len(schedule) > MAX_REQUESTS:
        raise ConfigError(f"the arrival schedule has {len(schedule)} requests; a live run takes at most "
                          f"{MAX_REQUESTS} (lower --rate, --duration or --requests)")
    items = _prefetch(pipe, len(schedule))
    execute = _executor(pipe, clock)
    started = datetime.now(timezone.utc)
    with _switch_interval(switch_interval_s) as interval:
        warm = lambda: _warm_up(execute, items, warmup, policy.max_batch_size)  # noqa: E731  (in each executor)
        batcher = DynamicBatcher(execute, policy, clock=clock, thread_init=warm).start()
        try:
            origin = clock() + LEAD_NS
            lags = generate(schedule, items, batcher.submit, start_ns=origin, clock=clock, sleep=sleep)
            batcher.wait_done(drain_timeout_s)
        finally:
            dropped = batcher.stop(abort=True)
        stopped = clock()
    requests, stages = load_tables(batcher.batches, dropped, pipe.stage_names, origin, stopped)
    summary = load_summary(requests, policy.concurrency)
    load = _load_meta(summary, lags, arrivals, policy, warmup, sum(batcher.init_results), drain_timeout_s,
                      interval, len(dropped))
    return Run(meta=_run_meta(pipe, started, len(requests), load, environment), requests=requests, stages=stages)


@contextlib.contextmanager
def _switch_interval(seconds: float | None):
    """``sys.setswitchinterval(seconds)`` for the block (unchanged when None); yields the interval in force."""
    old = sys.getswitchinterval()
    if seconds is not None:
        sys.setswitchinterval(seconds)
    try:
        yield sys.getswitchinterval()
    finally:
        sys.setswitchinterval(old)


def _run_meta(pipe, started: datetime, n_requests: int, load: dict, environment) -> dict[str, Any]:
    """run.json of a load run: the profiler's keys, kind ``load``, the waits as the first two stages."""
    cuda = pipe.config.is_cuda
    return {
        "kind": "load", "pipeline": pipe.name, "description": pipe.description,
        "stages": ["batch_wait", "queue_wait", *pipe.stage_names], "pipeline_stages": pipe.stage_names,
        "config": pipe.config.to_dict(), "env": environment(pipe.config), "created": started.isoformat(),
        "timing": {"warmup": 0, "requests": int(n_requests), "clock": "time.perf_counter_ns",
                   "sync": "stage" if cuda else None, "device_timer": "cuda_events" if cuda else None},
        "trace": None, "load": load,
    }


def _prefetch(pipe, n: int) -> list:
    """The n input items, drawn before the clock starts (drawing them is not the server's time)."""
    it = pipe.item_iterator()
    items = [x for _, x in zip(range(n), it)]
    if len(items) < n:
        raise PipelineError(f"pipeline {pipe.name!r}: item source ran out (got {len(items)} of {n} items)")
    return items


def _executor(pipe, clock: Clock):
    """``execute(items) -> RequestTiming`` for the executor threads.

    Each executor thread first takes the calling thread's torch intra-op
    thread count: OpenMP keeps that setting per thread, so a new thread would
    otherwise run with the default (all cores) while ``torch.get_num_threads()``
    in the caller says otherwise; on a 2-core machine that alone made CPU
    stages 10-50x slower in the threads. On CUDA each thread gets its own
    ``CudaStageTimer``.
    """
    from ..device import torch_or_none

    torch = torch_or_none()
    threads = torch.get_num_threads() if torch is not None else None
    names, fns = pipe.stage_names, [s.fn for s in pipe.stages]
    local = threading.local()

    def execute(batch):
        if not hasattr(local, "run"):
            if threads is not None:
                torch.set_num_threads(threads)
            if pipe.config.is_cuda:
                timer = CudaStageTimer(len(fns), "stage", clock)
                local.run = lambda b: timer.time_request(names, fns, b)
            else:
                local.run = lambda b: time_request(names, fns, b, clock)
        return local.run(batch)

    return execute


def _warm_up(execute, items: list, calls: int, max_batch_size: int) -> int:
    """Untimed calls at both ends of the batch-size range; returns how many failed."""
    failed = 0
    for _ in range(calls):
        for size in (max_batch_size, 1):
            batch = [items[k % len(items)] for k in range(size)] if items else []
            if batch and execute(batch).failure is not None:
                failed += 1
    return failed


def _load_meta(summary: dict, lags: np.ndarray, arrivals: Arrivals, policy: BatchPolicy, warmup: int,
               warm_failed: int, drain_timeout_s: float, switch_interval_s: float, dropped: int) -> dict[str, Any]:
    keys = ("throughput_rps", "mean_batch_size", "utilization", "batch_sizes", "requests", "failed", "batches")
    return {**{k: summary[k] for k in keys}, **lag_summary(lags), "arrivals": arrivals.params(),
            "policy": policy.params(), "warmup_calls_per_executor": 2 * warmup, "warmup_failed": warm_failed,
            "drain_timeout_s": drain_timeout_s, "dropped": dropped, "switch_interval_s": switch_interval_s}
