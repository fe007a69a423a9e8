"""A live load run: open-loop arrivals into the dynamic batcher in front of a real pipeline, in
this process (the generator on the calling thread, batcher and executors on their own).

A run is bounded: requests still queued ``drain_timeout_s`` after the last arrival fail
(``DrainTimeout``), never drop silently; with ``timeout_s`` every pipeline call runs under a
:class:`workbench.guard.StageGuard`, so a hung stage ends the run ``incomplete: timeout``. The
result is a ``load`` :class:`workbench.record.Run` with stages ``batch_wait``, ``queue_wait`` and
then the pipeline's. Open loop, timed from the due time: README "What is timed from where".
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..config import PipelineConfig, with_overrides
from ..device import torch_or_none
from ..errors import ConfigError, PipelineError
from ..examples import factory
from ..fingerprint import run_fingerprint
from ..noise import NoiseProbe, Readings
from ..record import Load, Run, SummaryFailure, summarized
from ..record.meta import STATUS_COMPLETE, STATUS_INTERRUPTED, STATUS_TIMEOUT
from ..sampling import StackSampler
from ..guard import TIMEOUT, Interrupted, StageGuard, StageTimeout, check_timeout
from ..pipeline import Pipeline, first_request_checked, resolve_pipeline
from ..runner import environment, failure_records, next_batch
from ..timing import Clock, collect_set_up_garbage, fine_timer_slack, stage_timer, stream_index
from ..units import ns_to_s
from .arrivals import Arrivals
from .continuous import ContinuousPolicy
from .continuous_live import LEAD_NS, refuse_without_steps, run_continuous
from .policy import BatchPolicy, DynamicBatcher, warm_up
from .summary import lag_noise, lag_percentiles, load_section, load_summary
from .summary import load_tables, pipeline_run_meta

MAX_REQUESTS = 1_000_000  # a live run holds every item and record in memory
JOIN_S = 1.0  # real seconds stop() waits for executors that are finishing normally


@dataclass(frozen=True)
class LoadOptions:
    """How :func:`run_load` runs; a value out of range is a ConfigError when it is made.

    warmup: untimed calls at sizes ``max_batch_size`` and 1 (each) per executor before the first
    arrival. timeout_s: real seconds one pipeline call may take (None: no limit). watch: a sweep
    point's :class:`~workbench.analysis.windows.StabilityWatch`, stopping the schedule once stable.
    """

    warmup: int = 5
    drain_timeout_s: float = 10.0
    switch_interval_s: float | None = None
    clock: Clock = time.perf_counter_ns
    sleep: Callable[[float], Any] = time.sleep
    noise_readings: Any = None
    timeout_s: float | None = None
    watch: Any = None
    continuous: ContinuousPolicy | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout_s", check_timeout(self.timeout_s))
        drain = self.drain_timeout_s
        if not (isinstance(drain, (int, float)) and drain > 0):
            raise ConfigError(f"drain_timeout_s must be > 0 seconds, got {drain!r}")


def run_load(
    target,
    config: PipelineConfig | None = None,
    *,
    arrivals: Arrivals,
    policy: BatchPolicy,
    options: LoadOptions | None = None,
    **overrides: Any,
) -> Run:
    """Run the load and return the (unsaved) run. target: a Pipeline, a factory or an example name;
    ``overrides`` are :class:`LoadOptions` fields by name (``warmup=2``)."""
    opts = with_overrides(options, LoadOptions, overrides, "run_load")
    cfg = (config or PipelineConfig()).replace(batch_size=policy.max_batch_size)
    build = factory(target) if isinstance(target, str) else target
    pipe = resolve_pipeline(build, cfg)
    refuse_without_steps(pipe, asked=opts.continuous is not None)
    schedule = arrivals.times_ns()
    if len(schedule) > MAX_REQUESTS:
        raise ConfigError(
            f"the arrival schedule has {len(schedule)} requests; a live run takes at most "
            f"{MAX_REQUESTS} (lower --rate, --duration or --requests)"
        )
    items = next_batch(pipe.item_iterator(), len(schedule), pipe.name)  # before the clock starts
    if pipe.steps is not None and stream_index(pipe.stages) is not None:
        return run_continuous(pipe, target, arrivals, items, opts)
    return _batched_run(pipe, build, target, arrivals, policy, schedule, items, opts)


def _batched_run(pipe, build, target, arrivals, policy, schedule, items, opts: LoadOptions) -> Run:
    """The dynamic batcher's run of ``items`` due at ``schedule``."""
    execute, threads, guards = pipeline_executor(pipe, build, opts.clock, opts.timeout_s)
    started = datetime.now(timezone.utc)
    probe = NoiseProbe(opts.noise_readings or Readings()).start()
    # every thread, every sample, as in profile (off with an injected clock: tests)
    sampler = StackSampler() if opts.clock is time.perf_counter_ns else None
    switch = _switch_interval(opts.switch_interval_s)
    try:
        with switch as interval, sampler or contextlib.nullcontext():
            batcher, lags, dropped, origin, stopped, interrupted = _drive(
                execute, pipe, items, schedule, policy, opts
            )
    finally:
        for guard in list(guards):
            guard.close()  # idle stage threads end; a stuck one is a daemon, left to itself
    requests, stages = load_tables(
        batcher.batches,
        dropped,
        pipe.stage_names,
        origin,
        stopped,
        batcher.stopped_by,
        schedule_ns=schedule,
    )
    failed: list[SummaryFailure] = []  # a summary that raises leaves its figures out; the run stays
    ok_ns = requests.loc[requests["ok"], "dur_ns"].to_numpy()
    noise = summarized(  # the machine's noise record with the generator's lag rule
        failed,
        "the noise reading",
        lambda: lag_noise(probe.finish(threads, ok_ns), lag_percentiles(lags)),
    )
    summary = summarized(failed, "the load summary", load_summary, requests, policy.concurrency)
    load, timed_out = _load_section(
        summary, lags, arrivals, policy, opts, batcher, len(dropped), interval
    )
    env = environment(pipe.config)
    status = STATUS_INTERRUPTED if interrupted else STATUS_TIMEOUT if timed_out else STATUS_COMPLETE
    waits_first = ["batch_wait", "queue_wait", *pipe.stage_names]
    meta = pipeline_run_meta(
        pipe, "load", waits_first, started, len(requests), env, load=Load.from_dict(load)
    ).replace(
        status=status,
        fingerprint=run_fingerprint(pipe, target, threads, env),
        noise=noise,
        sampled=sampler.record(origin) if sampler is not None else None,
    )
    run = Run(meta=meta, requests=requests, stages=stages, summary_failures=failed)
    if interrupted:
        raise Interrupted(run, f"interrupted after {len(requests)} of {len(schedule)} requests")
    return run


def _load_section(summary, lags, arrivals, policy, opts: LoadOptions, batcher, dropped, interval):
    """``(the load section of run.json, whether a call timed out)``."""
    warm_failures = _warm_failures(batcher)
    timed_out = batcher.stopped_by == "timeout" or any(
        f.error_type == TIMEOUT for f in warm_failures
    )
    return load_section(summary, lags, arrivals, policy.params()) | {
        "warmup_calls_per_executor": 2 * opts.warmup,
        "warmup_failed": len(warm_failures),
        "drain_timeout_s": opts.drain_timeout_s,
        "dropped": dropped,
        "switch_interval_s": interval,
        "warmup_failures": failure_records(warm_failures),
        "timeout_s": opts.timeout_s,
        "in_flight_at_stop": batcher.in_flight_at_stop,
    }, timed_out


def _drive(
    execute, pipe, items: list, schedule: np.ndarray, policy: BatchPolicy, opts: LoadOptions
):
    """Warm up, submit the schedule, drain, stop; a timed-out call stops the run."""
    clock, drain_timeout_s, timeout_s = opts.clock, opts.drain_timeout_s, opts.timeout_s
    warm = lambda: warm_up(execute, items, opts.warmup, policy.max_batch_size)  # noqa: E731  (in each executor)
    # the warm-up wait: the drain timeout, or longer than one call's timeout so that a hung call is a Timeout
    wait_s = drain_timeout_s if timeout_s is None else max(drain_timeout_s, timeout_s + 1.0)
    batcher = DynamicBatcher(
        execute, policy, clock=clock, thread_init=warm, stage_names=pipe.stage_names
    )
    batcher.start(timeout_s=wait_s)
    ready, executors = len(batcher.init_results), policy.concurrency
    if ready < executors:  # executors still warming up are abandoned and the run stops
        # daemon threads: they cannot keep the process alive
        batcher.stop(abort=True, join_timeout_s=0)
        raise StageTimeout(
            f"executor warm-up still running after {wait_s:g} s (the drain timeout or longer): a stage "
            f"does not return; {executors - ready} of {executors} executor threads abandoned, nothing measured"
        )
    collect_set_up_garbage()  # after the executors built and warmed up
    origin, lags, done, interrupted = clock() + LEAD_NS, np.zeros(0, dtype=np.int64), False, False
    try:
        try:
            if not any(f.error_type == TIMEOUT for f in _warm_failures(batcher)):
                submit, settled = _watched(batcher, opts.watch, origin, schedule)
                paced = dict(start_ns=origin, clock=clock, sleep=opts.sleep, cancel=batcher.halted)
                lags = generate(schedule, items, submit, stop=settled, **paced)
        except KeyboardInterrupt as stop:  # no more arrivals; what was submitted still finishes
            lags, interrupted = getattr(stop, "lags_ns", lags), True
        try:
            done = batcher.wait_done(drain_timeout_s)
        except KeyboardInterrupt:
            if interrupted:  # a second Ctrl-C gives up on the run
                raise
            interrupted = True  # all was submitted: keep what finished; batches in flight are recorded as stopped
    finally:  # past the drain deadline (or on a second Ctrl-C) batches still in flight are recorded, not joined
        dropped = batcher.stop(abort=True, join_timeout_s=JOIN_S if done else 0.0)
    return batcher, lags, dropped, origin, clock(), interrupted


def generate(
    schedule_ns: np.ndarray,
    items: Sequence[Any],
    submit: Callable[[Any], tuple[int, int]],
    *,
    start_ns: int,
    clock: Clock = time.perf_counter_ns,
    sleep: Callable[[float], None] = time.sleep,
    cancel: Any = None,
    stop: Callable[[int], bool] | None = None,
) -> np.ndarray:
    """Submit ``items[k]`` at ``start_ns + schedule_ns[k]``; return each submission's lag (int64 ns,
    ``max(0, arrival_ns - due)``, ``submit(item) -> (request id, arrival_ns)``). ``cancel.is_set()``
    or ``stop(offset)`` stops early (fewer lags); Ctrl-C propagates with the lags as ``lags_ns``."""
    lags = np.zeros(len(schedule_ns), dtype=np.int64)
    k = 0
    try:
        with fine_timer_slack():  # woken at each due time, not 74 us after it (timing.py)
            for k, offset in enumerate(schedule_ns.tolist()):
                due = start_ns + offset
                now = clock()
                if now < due:
                    sleep(ns_to_s(due - now))
                if (cancel is not None and cancel.is_set()) or (stop is not None and stop(offset)):
                    return lags[:k]
                _, arrival = submit(items[k])
                lags[k] = max(0, arrival - due)
    except KeyboardInterrupt as stop:
        stop.lags_ns = lags[:k]  # request k was not submitted (or its lag not taken)
        raise
    return lags


def _watched(batcher: DynamicBatcher, watch, origin: int, schedule: np.ndarray):
    """``(submit, stop)`` for :func:`generate`: the batcher's submit and the ``watch``'s stop rule."""
    if watch is None:
        return batcher.submit, None
    seen = 0

    def submit(item):
        rid, arrival = batcher.submit(item)
        watch.sent(int(schedule[rid]))
        return rid, arrival

    def settled(offset_ns: int) -> bool:
        nonlocal seen
        done = len(batcher.batches)
        for rec in batcher.batches[seen:done]:
            ok = rec.timing.failure is None
            for rid in rec.requests:
                due = int(schedule[rid])
                watch.finished(due, due, rec.end_ns - origin - due, ok)
        seen = done
        return watch.stop(offset_ns)

    return submit, settled


def _warm_failures(batcher: DynamicBatcher) -> list:
    """The executors' warm-up ``StageFailure`` s."""
    return [f for result in batcher.init_results for f in (result or [])]


@contextlib.contextmanager
def _switch_interval(seconds: float | None):
    """``sys.setswitchinterval(seconds)`` for the block (None: unchanged); yields the interval."""
    old = sys.getswitchinterval()
    if seconds is not None:
        sys.setswitchinterval(seconds)
    try:
        yield sys.getswitchinterval()
    finally:
        sys.setswitchinterval(old)


def pipeline_executor(pipe, target, clock: Clock, timeout_s: float | None = None):
    """``(execute(items, starts=, ends=) -> RequestTiming, threads, guards)`` for executor threads
    (a load run's, ``workbench serve``'s). Each builds its own pipeline on its first call, in the
    thread that runs the stages (``sqlite3`` connections work only there), after setting torch's
    thread count: OpenMP keeps it per thread and a new thread's default (all cores) can be many
    times slower. With ``timeout_s`` that thread is the executor's :class:`StageGuard`."""
    torch, cfg = torch_or_none(), pipe.config
    threads = cfg.threads or (torch.get_num_threads() if torch is not None else None)
    local = threading.local()
    guards: list[StageGuard] = []

    def build():
        """This thread's stage timer, ``run_one(batch, starts=, ends=) -> RequestTiming``."""
        if threads is not None:
            torch.set_num_threads(threads)
        own = pipe if isinstance(target, Pipeline) else resolve_pipeline(target, cfg)
        if own.stage_names != pipe.stage_names:
            raise PipelineError(
                f"pipeline {pipe.name!r}: the factory built stages {own.stage_names} in an executor "
                f"thread but {pipe.stage_names} in the calling thread; it must build the same stages"
            )
        # the first call (a warm-up) refuses a stage returning a generator: timed in the next stage
        return first_request_checked(stage_timer(own, clock), own, options=False)

    def execute(batch, starts=None, ends=None):
        if not hasattr(local, "run") and timeout_s is None:
            local.run = build()
        elif not hasattr(local, "run"):  # the guard's stage thread builds the stage timer first
            built: list = []
            local.run = StageGuard(
                lambda batch, starts, ends: built[0](batch, starts=starts, ends=ends),
                pipe.stage_names,
                timeout_s,
                clock=clock,
                thread_init=lambda: built.append(build()),
            )
            guards.append(local.run)
        return local.run(batch, starts=starts, ends=ends)

    return execute, threads, guards
