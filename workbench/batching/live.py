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
import dataclasses
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..config import PipelineConfig
from ..errors import ConfigError, PipelineError
from ..record import Run, RunMeta
from ..guard import StageTimeout
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
             clock: Clock = time.perf_counter_ns, sleep=time.sleep, noise_readings=None) -> Run:
    """Run the load and return the (unsaved) run.

    target: a Pipeline, a factory or an example name (as ``workbench.profile``).
    warmup: untimed pipeline calls at sizes ``max_batch_size`` and 1 (each), run by every
        executor thread before the first arrival.
    switch_interval_s: if set, ``sys.setswitchinterval`` for the run (restored after).
    noise_readings: a :class:`workbench.noise.Readings` (tests inject one).
    """
    from ..fingerprint import run_fingerprint
    from ..noise import NoiseProbe, Readings
    from ..runner import environment, failure_records, resolve_pipeline

    if not (isinstance(drain_timeout_s, (int, float)) and drain_timeout_s > 0):
        raise ConfigError(f"drain_timeout_s must be > 0 seconds, got {drain_timeout_s!r}")
    cfg = (config or PipelineConfig()).replace(batch_size=policy.max_batch_size)
    pipe = resolve_pipeline(target, cfg)
    schedule = arrivals.times_ns()
    if len(schedule) > MAX_REQUESTS:
        raise ConfigError(f"the arrival schedule has {len(schedule)} requests; a live run takes at most "
                          f"{MAX_REQUESTS} (lower --rate, --duration or --requests)")
    items = _prefetch(pipe, len(schedule))
    execute, threads = _executor(pipe, target, clock)
    started = datetime.now(timezone.utc)
    probe = NoiseProbe(noise_readings or Readings()).start()
    with _switch_interval(switch_interval_s) as interval:
        warm = lambda: _warm_up(execute, items, warmup, policy.max_batch_size)  # noqa: E731  (in each executor)
        batcher = DynamicBatcher(execute, policy, clock=clock, thread_init=warm).start(timeout_s=drain_timeout_s)
        _check_warm(batcher, policy.concurrency, drain_timeout_s)
        try:
            origin = clock() + LEAD_NS
            lags = generate(schedule, items, batcher.submit, start_ns=origin, clock=clock, sleep=sleep)
            batcher.wait_done(drain_timeout_s)
        finally:
            dropped = batcher.stop(abort=True)
        stopped = clock()
    requests, stages = load_tables(batcher.batches, dropped, pipe.stage_names, origin, stopped)
    noise = probe.finish(threads, requests.loc[requests["ok"], "dur_ns"].to_numpy())
    summary = load_summary(requests, policy.concurrency)
    warm_failures = [f for result in batcher.init_results for f in (result or [])]
    load = _load_meta(summary, lags, arrivals, policy, warmup, len(warm_failures), drain_timeout_s,
                      interval, len(dropped)) | {"warmup_failures": failure_records(warm_failures)}
    meta = _run_meta(pipe, started, len(requests), load, environment)
    env = meta["env"]
    for key, value in (("fingerprint", run_fingerprint(pipe, target, threads, env)), ("noise", noise)):
        meta = _with_key(meta, key, value)
    return Run(meta=meta, requests=requests, stages=stages)


def _with_key(meta, key: str, value):
    """``meta`` with one more field, whether it is a plain dict or the typed record."""
    if isinstance(meta, dict):
        return meta | {key: value}
    return dataclasses.replace(meta, **{key: value})


def _check_warm(batcher: DynamicBatcher, executors: int, drain_timeout_s: float) -> None:
    """The warm-up wait honours the drain timeout: executors still warming up then are abandoned."""
    ready = len(batcher.init_results)
    if ready >= executors:
        return
    batcher.stop(abort=True, join_timeout_s=0)  # daemon threads: they cannot keep the process alive
    raise StageTimeout(f"executor warm-up still running after {drain_timeout_s:g} s (the drain timeout): a stage "
                       f"does not return; {executors - ready} of {executors} executor threads abandoned, nothing measured")


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


def _run_meta(pipe, started: datetime, n_requests: int, load: dict, environment) -> RunMeta:
    """run.json of a load run: the profiler's fields, kind ``load``, the waits as the first two stages."""
    cuda = pipe.config.is_cuda
    return RunMeta(
        kind="load", pipeline=pipe.name, description=pipe.description,
        stages=["batch_wait", "queue_wait", *pipe.stage_names], pipeline_stages=pipe.stage_names,
        config=pipe.config.to_dict(), env=environment(pipe.config), created=started.isoformat(),
        timing={"warmup": 0, "requests": int(n_requests), "clock": "time.perf_counter_ns",
                "sync": "stage" if cuda else None, "device_timer": "cuda_events" if cuda else None},
        trace=None, load=load,
    )


def _prefetch(pipe, n: int) -> list:
    """The n input items, drawn before the clock starts (drawing them is not the server's time)."""
    it = pipe.item_iterator()
    items = [x for _, x in zip(range(n), it)]
    if len(items) < n:
        raise PipelineError(f"pipeline {pipe.name!r}: item source ran out (got {len(items)} of {n} items)")
    return items


def _executor(pipe, target, clock: Clock):
    """``(execute(items) -> RequestTiming, threads)`` for the executor threads.

    Each executor thread builds its own pipeline from the factory, in that
    thread, on its first call: a stage may hold objects that only work in the
    thread that made them (a plain ``sqlite3.connect``). A built Pipeline
    passed as ``target`` cannot be rebuilt and is shared.

    Each executor thread also sets torch's intra-op thread count first:
    ``config.threads`` when set, else the calling thread's count. OpenMP keeps
    that setting per thread, so a new thread would otherwise run with the
    default (all cores); on a 2-core machine that alone made CPU stages 10-50x
    slower in the threads. On CUDA each thread gets its own ``CudaStageTimer``.
    """
    from ..device import torch_or_none
    from ..pipeline import Pipeline
    from ..runner import resolve_pipeline

    torch = torch_or_none()
    cfg = pipe.config
    threads = cfg.threads if cfg.threads is not None else (torch.get_num_threads() if torch is not None else None)
    local = threading.local()

    def setup():
        if threads is not None:
            torch.set_num_threads(threads)
        own = pipe if isinstance(target, Pipeline) else resolve_pipeline(target, cfg)
        if own.stage_names != pipe.stage_names:
            raise PipelineError(f"pipeline {pipe.name!r}: the factory built stages {own.stage_names} in an executor "
                                f"thread but {pipe.stage_names} in the calling thread; it must build the same stages")
        names, fns = own.stage_names, [s.fn for s in own.stages]
        if cfg.is_cuda:
            timer = CudaStageTimer(len(fns), "stage", clock)
            local.run = lambda b: timer.time_request(names, fns, b)
        else:
            local.run = lambda b: time_request(names, fns, b, clock)

    def execute(batch):
        if not hasattr(local, "run"):
            setup()
        return local.run(batch)

    return execute, threads


def _warm_up(execute, items: list, calls: int, max_batch_size: int) -> list:
    """Untimed calls at both ends of the batch-size range; returns their failures (``StageFailure`` s)."""
    failures = []
    for _ in range(calls):
        for size in (max_batch_size, 1):
            batch = [items[k % len(items)] for k in range(size)] if items else []
            if batch:
                failure = execute(batch).failure
                if failure is not None:
                    failures.append(failure)
    return failures


def _load_meta(summary: dict, lags: np.ndarray, arrivals: Arrivals, policy: BatchPolicy, warmup: int,
               warm_failed: int, drain_timeout_s: float, switch_interval_s: float, dropped: int) -> dict[str, Any]:
    keys = ("throughput_rps", "mean_batch_size", "utilization", "batch_sizes", "requests", "failed", "batches")
    return {**{k: summary[k] for k in keys}, **lag_summary(lags), "arrivals": arrivals.params(),
            "policy": policy.params(), "warmup_calls_per_executor": 2 * warmup, "warmup_failed": warm_failed,
            "drain_timeout_s": drain_timeout_s, "dropped": dropped, "switch_interval_s": switch_interval_s}
