"""Profile a pipeline: a timing run for percentiles, then a separate traced run; a :class:`Run`.

The timing run has no profiler attached; the traced run's few requests run under ``torch.profiler``,
each stage in its ``record_function`` range (trace names as ``tensorboard_trace_handler``'s).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import itertools
import os
import platform
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from .analysis import stacks as stack_analysis  # by module: tests plant a failing summary there
from .analysis.stats import percentile_ci_ns, percentile_ns, summarize_ns
from .batching.arrivals import Arrivals
from .config import PipelineConfig, with_overrides
from .device import cpu_model, device_name, quiet_profiler, require_torch, torch_threads
from .errors import ConfigError, PipelineError, check_int, is_number
from .examples import factory
from .fingerprint import run_fingerprint
from .naming import stage_range_name
from .noise import NoiseProbe, Readings
from .pipeline import Pipeline, first_request_checked, resolve_pipeline
from .record.meta import STATUS_COMPLETE, STATUS_INTERRUPTED, STATUS_TIMEOUT
from .record import (
    Run,
    ProfileMeta,
    build_tables,
    request_row,
    scratch_folder,
    stage_rows,
    summarized,
    SummaryFailure,
)
from .sampling import DEFAULT_INTERVAL_S, StackSampler, assign, mark_due
from .timing import (
    SYNC_POLICIES,
    Clock,
    GcProbe,
    RequestTiming,
    StageFailure,
    collect_set_up_garbage,
    fine_timer_slack,
    stage_timer,
    traced_fn,
    units_table,
)
from .guard import TIMEOUT, Cancelled, Interrupted, check_timeout, guarded, is_timeout  # noqa: F401 (Cancelled: public here)
from .memory import MemorySampler, RssReader, StageMemory, rss_bytes
from .units import ns_to_ms, ns_to_s, s_to_ns

Progress = Callable[[int, int, str], None]
DEFAULT_REQUESTS = 600  # bounds the p99 interval (the order-statistic interval needs about 563)
DEFAULT_MAX_DURATION_S = 30.0
DEFAULT_TRACED = 50  # the slowest 3 against the median 10 traced requests, 1-2 s (benchmarks/results/traced_count.md)
DEFAULT_MIN_DURATION_S = 10.0  # a paced run sees periods up to about a tenth of it (periodic)
# profile's default pace: requests sample time every 1 / (0.3 x capacity) while the queue the schedule
# builds stays short (benchmarks/results/open_closed.md)
DEFAULT_UTILIZATION = 0.3
NARROW_P99 = 0.2  # a paced run may stop once its p99 interval is within 20 % of the p99
CHECK_EVERY = 50  # paced requests between two looks at the p99 interval


@dataclasses.dataclass(frozen=True)
class Pace:
    """An open-loop Poisson schedule: ``rate_rps`` requests per second, or ``utilization`` (0 < u <
    1) of the closed-loop capacity measured first; it runs until ``min_duration_s`` passed and the
    p99 interval is within ``NARROW_P99``, or ``max_duration_s``."""

    rate_rps: float | None = None
    utilization: float | None = None
    min_duration_s: float = DEFAULT_MIN_DURATION_S
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.rate_rps is None) == (self.utilization is None):
            raise ConfigError("pace with one of rate_rps (--rate) or utilization (--utilization)")
        if self.rate_rps is not None and not (is_number(self.rate_rps) and self.rate_rps > 0):
            raise ConfigError(f"rate must be > 0 requests/s (--rate), got {self.rate_rps!r}")
        if self.utilization is not None and not (
            is_number(self.utilization) and 0 < self.utilization < 1
        ):
            raise ConfigError(
                f"utilization must be in (0, 1) (--utilization), got {self.utilization!r}"
            )
        if not (is_number(self.min_duration_s) and self.min_duration_s >= 0):
            raise ConfigError(f"min_duration_s must be >= 0 seconds, got {self.min_duration_s!r}")


@dataclasses.dataclass(frozen=True)
class MeasurePlan:
    """The options of one :func:`profile` call, checked when made (out of range: ConfigError).

    requests: measured requests (pipeline calls of ``batch_size`` items); max_duration_s: seconds
        of measured requests after which measuring stops (None: no limit); warmup: requests run
        first, reported apart; traced: requests of the ``torch.profiler`` run (0: no trace).
    sync: CUDA synchronization (``workbench.timing``); cancel: anything with ``is_set()``.
    timeout_s: seconds one request may take (None: no limit; ``workbench.guard``).
    stacks, shapes, modules: the traced run's ``with_stack``, ``record_shapes``, ``with_modules``.
    sample_stacks: sample the timed requests' Python stacks (``workbench.sampling``).
    on_recorded: called with the run as measured, before any summary (the command line saves).
    pace: a :class:`Pace` for the measured requests, after ``requests`` closed-loop ones.
    noise_readings, read_rss, clock, sleep: injected by tests.
    """

    requests: int = DEFAULT_REQUESTS
    max_duration_s: float | None = DEFAULT_MAX_DURATION_S
    warmup: int = 10
    traced: int = DEFAULT_TRACED
    sync: str = "stage"
    clock: Clock = time.perf_counter_ns
    progress: Progress | None = None
    cancel: Any = None
    noise_readings: Any = None
    timeout_s: float | None = None
    read_rss: RssReader | None = None
    stacks: bool = True
    shapes: bool = False
    modules: bool = False
    sample_stacks: bool = True
    on_recorded: Callable[[Run], Any] | None = None
    pace: Pace | None = None
    sleep: Callable[[float], Any] = time.sleep

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout_s", check_timeout(self.timeout_s))
        check_int("requests", self.requests, 1)
        check_int("warmup", self.warmup, 0)
        check_int("traced", self.traced, 0)
        if self.sync not in SYNC_POLICIES:
            raise ConfigError(f"sync must be one of {', '.join(SYNC_POLICIES)}, got {self.sync!r}")
        limit = self.max_duration_s
        if limit is not None and not (is_number(limit) and limit > 0):
            raise ConfigError(
                f"max_duration_s must be a number of seconds > 0 or None, got {limit!r}"
            )

    @property
    def sample_interval_s(self) -> float | None:
        """Stack sampling of the timing run (None: off, also with an injected clock)."""
        on = self.sample_stacks and self.clock is time.perf_counter_ns
        return DEFAULT_INTERVAL_S if on else None


def profile(
    target: Pipeline | Callable | str,
    config: PipelineConfig | None = None,
    options: MeasurePlan | None = None,
    **overrides: Any,
) -> Run:
    """Measure a pipeline (a Pipeline, a factory or an example's name) stage by stage: the run,
    unsaved. ``options``: a :class:`MeasurePlan`, ``overrides`` its fields (``requests=200``);
    Ctrl-C raises :class:`workbench.guard.Interrupted` holding the ``run`` measured so far."""
    plan = with_overrides(options, MeasurePlan, overrides, "profile")
    build_started_ns = time.perf_counter_ns()
    pipe = resolve_pipeline(factory(target) if isinstance(target, str) else target, config)
    build_ns = None if isinstance(target, Pipeline) else time.perf_counter_ns() - build_started_ns
    threads_before = torch_threads()
    scratch: list[Path] = []  # a finished trace's folder, until the Run owns it
    try:
        threads = pipe.config.apply_threads()  # in this thread: the one that runs the stages
        return _measure(plan, pipe, (target, threads, build_ns), scratch)
    except BaseException:  # Ctrl-C or an error after the traced run: no scratch folder left behind
        for folder in scratch:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        if pipe.config.threads is not None and threads_before is not None:
            require_torch().set_num_threads(threads_before)


def _measure(plan: MeasurePlan, pipe: Pipeline, built: tuple, scratch: list[Path]) -> Run:
    """The timing run, then the traced run; ``built``: (target, torch threads, build ns)."""
    (target, threads, build_ns), cfg, warmup = built, pipe.config, plan.warmup
    items = pipe.item_iterator()
    started = datetime.now(timezone.utc)
    probe = NoiseProbe(plan.noise_readings or Readings()).start()
    memory = MemorySampler(plan.read_rss or rss_bytes, start=warmup)
    sampler = StackSampler(plan.sample_interval_s) if plan.sample_interval_s else None
    paced = _PacedPhase() if plan.pace is not None else None
    timings, status = _timing_run(plan, pipe, items, memory, sampler, paced)
    pacing = None
    if paced is not None and paced.due_ns:
        closed = timings[warmup : len(timings) - len(paced.due_ns)]
        timings = timings[:warmup] + timings[len(timings) - len(paced.due_ns) :]
        pacing = _pacing_meta(plan, paced, closed, timings[warmup:])
    requests_df, stages_df = _tables(
        timings, pipe.stage_names, warmup, cfg.batch_size, paced.due_ns if pacing else ()
    )
    attributes = _describe(pipe, timings, requests_df)
    measured = requests_df[~requests_df["warmup"] & requests_df["ok"]]
    # the readings' summaries: a bug in one leaves its section out
    failed: list[SummaryFailure] = []
    noise = summarized(
        failed, "the noise reading", probe.finish, threads, measured["dur_ns"].to_numpy()
    )
    trend = summarized(failed, "the memory trend", memory.summary)
    trace_path, trace_meta, status = _traced_phase(plan, pipe, items, status, scratch)
    env = environment(cfg)
    meta = ProfileMeta.from_dict(  # each section checked and typed
        {
            "pipeline": pipe.name,
            "description": pipe.description,
            "stages": list(pipe.stage_names),
            "config": cfg.to_dict(),
            "env": env,
            "created": started.isoformat(),
            "timing": _timing_meta(
                plan, cfg, len(timings) - min(warmup, len(timings)), status, pacing
            ),
            "trace": trace_meta,
            "fingerprint": run_fingerprint(pipe, target, threads, env),
            "noise": noise,
            "status": status,
            "quantization": quantization_meta(pipe),
            "memory": trend,
            "stage_roles": dict(pipe.stage_roles),
            "attributes": attributes,
            "cold_start": _cold_start(build_ns, timings),
            "sampled": sampler.record(timings[0].start_ns)
            if sampler is not None and timings
            else None,
        }
    )
    units = units_table(pipe.stages, timings)
    run = Run(meta, requests_df, stages_df, trace_path, summary_failures=failed, units=units)
    _record_then_explain(run, plan, sampler, timings)
    if status == STATUS_INTERRUPTED:
        raise Interrupted(run, f"interrupted after {len(timings)} requests")
    return run


def _traced_phase(
    plan: MeasurePlan, pipe: Pipeline, items, status: str, scratch: list[Path]
) -> tuple[Path | None, dict[str, Any] | None, str]:
    """After a complete timing run, ``plan.traced`` requests under torch.profiler: (trace, meta, status)."""
    if not plan.traced or status != STATUS_COMPLETE:
        return None, None, status
    out_dir = scratch_folder()
    try:
        with _alarm(plan.timeout_s) as alarm:
            trace_path, trace_meta = _traced_requests(plan, pipe, items, out_dir, alarm)
    except BaseException as exc:
        shutil.rmtree(out_dir, ignore_errors=True)
        if isinstance(exc, KeyboardInterrupt):  # the timing run is kept
            return None, None, STATUS_INTERRUPTED
        if not isinstance(exc, TracedTimeout):
            raise
        # the timing run is kept; the traced run's failure is recorded
        meta = {"requests": plan.traced, "failed_requests": 1, "stopped_by": "timeout"}
        return None, {**meta, "failures": failure_records([exc.failure])}, STATUS_TIMEOUT
    scratch.append(out_dir)
    return trace_path, trace_meta, status


def _timing_meta(
    plan: MeasurePlan, cfg: PipelineConfig, n_measured: int, status: str, pacing: dict | None
) -> dict[str, Any]:
    """``timing`` of run.json: counts, clock and what stopped the measured requests."""
    if pacing is not None:
        stopped_by = pacing.pop("stopped_by")
    elif status == STATUS_COMPLETE:
        stopped_by = "requests" if n_measured >= plan.requests else "max_duration_s"
    else:
        stopped_by = status
    return {
        "warmup": plan.warmup,
        "requests": n_measured,
        "clock": "time.perf_counter_ns",
        "sync": plan.sync if cfg.is_cuda else None,
        "device_timer": "cuda_events" if cfg.is_cuda else None,
        "requests_asked": plan.requests,
        "max_duration_s": plan.max_duration_s,
        "stopped_by": stopped_by,
        "pacing": pacing,
    }


def _record_then_explain(run: Run, plan: MeasurePlan, sampler, timings: list[RequestTiming]):
    """``on_recorded`` (measure, save), then the stack summary added to ``run.meta``."""
    try:
        if plan.on_recorded is not None:
            plan.on_recorded(run)
        names = run.meta.stages
        failed = run.summary_failures
        stacks = summarized(
            failed, "the stack summary", _stack_summary, sampler, timings, names, run
        )
    except KeyboardInterrupt:  # held while it was saved; the run as measured is kept
        raise Interrupted(run, f"interrupted after {len(timings)} requests") from None
    if stacks is not None:
        run.meta = run.meta.replace(stacks=stacks)


def quantization_meta(pipe: Pipeline) -> dict[str, Any] | None:
    """What int8 quantized (None at other precisions): ``prepare_model``'s reports."""
    if pipe.config.precision != "int8":
        return None
    reports = list(pipe.quantization)
    not_recorded = (
        "not recorded: the pipeline did not quantize through workbench.precision.prepare_model"
    )
    text = "; ".join(r["text"] for r in reports) if reports else not_recorded
    return {"models": reports, "text": text}


def next_batch(items, batch_size: int, pipe_name: str) -> list:
    """The next ``batch_size`` items; a PipelineError when they run out."""
    batch = list(itertools.islice(items, batch_size))
    if len(batch) < batch_size:
        raise PipelineError(
            f"pipeline {pipe_name!r}: item source ran out (got {len(batch)} of {batch_size} items)"
        )
    return batch


def _timing_run(
    plan: MeasurePlan,
    pipe: Pipeline,
    items,
    memory: MemorySampler,
    sampler: StackSampler | None,
    paced: _PacedPhase | None = None,
) -> tuple[list[RequestTiming], str]:
    """Warm-up, measured requests (up to ``max_duration_s``) and any paced ones; the status."""
    clock, cancel, warmup = plan.clock, plan.cancel, plan.warmup
    total = warmup + plan.requests
    deadline_ns = None if plan.max_duration_s is None else s_to_ns(plan.max_duration_s)
    names, gc_probe = pipe.stage_names, GcProbe(clock)
    describe = {i: s.describe for i, s in enumerate(pipe.stages) if s.describe is not None}
    timer = stage_timer(pipe, clock, plan.sync, gc_probe=gc_probe, describe=describe)
    run_one = first_request_checked(timer, pipe)
    batch = functools.partial(next_batch, items, pipe.config.batch_size, pipe.name)
    out: list[RequestTiming] = []
    measured_from = None
    with (
        gc_probe,
        sampler or contextlib.nullcontext(),
        guarded(run_one, names, plan.timeout_s, clock=clock, cancel=cancel) as call,
    ):
        try:
            memory.observe(0)
            for i in range(total):
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"cancelled after {i} of {total} requests")
                if i == warmup:  # the warm-up's and the set-up's garbage is no request's pause
                    collect_set_up_garbage()
                    measured_from = clock() if deadline_ns is not None else None
                elif measured_from is not None and clock() - measured_from >= deadline_ns:
                    break  # measured_from is set: past the first measured request
                out.append(call(batch()))
                out[-1].output = None  # describe= has run: the answer is not the run's to keep
                if is_timeout(out[-1]):
                    return out, STATUS_TIMEOUT
                memory.observe(i + 1)
                if plan.progress is not None:
                    plan.progress(i + 1, total, "timing")
            if paced is not None:
                with fine_timer_slack():  # woken at each due time, not 74 us after it
                    return out, _paced_requests(plan, batch, call, out, paced)
        except KeyboardInterrupt:
            return out, STATUS_INTERRUPTED
        finally:
            mark_due(None)  # a paced phase that raised leaves no due time behind
    return out, STATUS_COMPLETE


@dataclasses.dataclass
class _PacedPhase:
    """The paced phase's due times (ns of ``clock``), rates and why it stopped."""

    due_ns: list[int] = dataclasses.field(default_factory=list)
    rate_rps: float | None = None
    capacity_rps: float | None = None
    stopped_by: str | None = None
    wall_s: float | None = None


def _paced_requests(
    plan: MeasurePlan, batch: Callable[[], list], call, out: list[RequestTiming], paced: _PacedPhase
) -> str:
    """Requests sent at their due times (:class:`Pace`), appended to ``out``; the status."""
    pace, clock, closed = plan.pace, plan.clock, out[plan.warmup :]
    served = [t.end_ns - t.start_ns for t in closed if t.failure is None]
    paced.capacity_rps = len(served) / ns_to_s(sum(served)) if served and sum(served) else None
    rate = pace.rate_rps or pace.utilization * (paced.capacity_rps or 0.0)
    if not rate > 0:
        raise PipelineError(
            "no closed-loop request succeeded: no capacity to pace a utilization of"
        )
    paced.rate_rps = rate
    bound_s = plan.max_duration_s or 3600.0
    schedule = Arrivals("poisson", rate_rps=rate, duration_s=bound_s, seed=pace.seed).times_ns()
    collect_set_up_garbage()  # and the closed-loop requests' records
    started, durs, min_ns = clock(), [], s_to_ns(pace.min_duration_s)
    paced.stopped_by = "max_duration_s"
    for k, due in enumerate(schedule.tolist()):
        if plan.cancel is not None and plan.cancel.is_set():
            raise Cancelled(f"cancelled after {k} paced requests")
        now = clock()
        if k % CHECK_EVERY == 0 and now - started >= min_ns and durs:
            lo, hi = percentile_ci_ns(durs, 99)
            if None not in (lo, hi) and hi - lo <= NARROW_P99 * percentile_ns(durs, 99):
                paced.stopped_by = "p99_interval"
                break
        mark_due(started + due)  # late past it: the sampler says why (sampling.mark_due)
        if started + due > now:
            plan.sleep(ns_to_s(started + due - now))
        out.append(call(batch()))
        # after the call: an interrupted one is not kept; a sleep that woke early is not a lag
        paced.due_ns.append(min(started + due, out[-1].start_ns))
        out[-1].output = None
        if is_timeout(out[-1]):
            paced.stopped_by = STATUS_TIMEOUT
            return STATUS_TIMEOUT
        if out[-1].failure is None:  # from the due time: a request sent late waited for it
            durs.append(out[-1].end_ns - paced.due_ns[-1])
        if plan.progress is not None:  # ms of wall time against the minimum duration
            plan.progress(round(ns_to_ms(clock() - started)), round(ns_to_ms(min_ns)), "paced")
    paced.wall_s = ns_to_s(clock() - started)
    return STATUS_COMPLETE


def _pacing_meta(
    plan: MeasurePlan,
    paced: _PacedPhase,
    closed: list[RequestTiming],
    measured: list[RequestTiming],
) -> dict[str, Any]:
    """``timing.pacing`` of run.json (docs/json.md); ``p99_over_closed_loop`` compares service times."""

    def summary(timings, due=None):
        due = due or [t.start_ns for t in timings]
        s = summarize_ns([t.end_ns - d for t, d in zip(timings, due) if t.failure is None])
        return {k: s[k] for k in ("count", "mean_ms", "p50_ms", "p99_ms")}

    lag = [t.start_ns - due for t, due in zip(measured, paced.due_ns)]
    p99_lag = summarize_ns(lag)["p99_ms"]
    closed_p99, paced_p99 = summary(closed)["p99_ms"], summary(measured)["p99_ms"]
    return {
        "process": "poisson",
        "rate_rps": paced.rate_rps,
        "utilization": plan.pace.utilization,
        "capacity_rps": paced.capacity_rps,
        "seed": plan.pace.seed,
        "min_duration_s": plan.pace.min_duration_s,
        "wall_s": paced.wall_s,
        "lag_p99_ms": p99_lag,
        "closed_loop": summary(closed),
        "paced": summary(measured, paced.due_ns),
        "service": summary(measured),
        "p99_over_closed_loop": paced_p99 / closed_p99 if closed_p99 and paced_p99 else None,
        "stopped_by": paced.stopped_by,
    }


def _tables(
    timings: list[RequestTiming],
    names: list[str],
    warmup: int,
    batch_size: int,
    due_ns: list[int] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Requests and stages tables; the last ``len(due_ns)`` requests were paced."""
    due = [t.start_ns for t in timings[: len(timings) - len(due_ns)]] + list(due_ns)
    origin = due[0] if due else 0
    req_rows, st_rows, gc_ns = [], [], []
    for i, t in enumerate(timings):
        req_rows.append(
            request_row(i, i < warmup, due[i] - origin, t.end_ns - due[i], t.failure, batch_size)
        )
        rows = stage_rows(i, t, names, origin)
        st_rows += rows
        gc_ns += (t.stage_gc_ns or [None] * len(rows))[: len(rows)]
    requests, stages = build_tables(req_rows, st_rows)
    if len(due_ns):
        lag = [t.start_ns - d for t, d in zip(timings, due)]
        requests["lag_ns"] = pd.array(lag, dtype="int64")
    if any(v is not None for v in gc_ns):  # GC pause time inside the stage (timing.GcProbe)
        stages["gc_ns"] = pd.array(gc_ns, dtype="Int64")
    return requests, stages


def _describe(
    pipe: Pipeline, timings: list[RequestTiming], requests: pd.DataFrame
) -> dict[str, Any] | None:
    """``describe=`` numbers added as ``attr.<name>`` columns; the ``attributes`` meta or None."""
    stage_of = {i: s.name for i, s in enumerate(pipe.stages) if s.describe is not None}
    if not stage_of:
        return None
    columns: dict[str, list] = {}
    by_stage: dict[str, list[str]] = {name: [] for name in stage_of.values()}
    errors: dict[str, str] = {}
    for row, t in enumerate(timings):
        for i, message in (t.attribute_errors or {}).items():
            errors.setdefault(stage_of[i], message)
        for i, numbers in (t.attributes or {}).items():
            for name, number in numbers.items():
                columns.setdefault(name, [None] * len(timings))[row] = number
                if name not in by_stage[stage_of[i]]:
                    by_stage[stage_of[i]].append(name)
    for name, values in columns.items():
        requests[f"attr.{name}"] = pd.array(values, dtype="Float64")
    return {"names": sorted(columns), "stages": by_stage, "errors": errors}


def _stack_summary(
    sampler, timings: list[RequestTiming], names: list[str], run: Run
) -> dict[str, Any] | None:
    """The slow requests' sampled stacks against the median ones (``analysis.stacks``)."""
    if sampler is None:
        return None
    got = assign(sampler, timings, names)
    return stack_analysis.stack_summary(
        stack_analysis.samples_frame(got.request, got.stage, got.stack),
        got.stacks,
        run.requests,
        run.stages,
        names,
        interval_s=got.interval_s,
        unassigned=got.unassigned,
    )


def _cold_start(build_ns: int | None, timings: list[RequestTiming]) -> dict[str, Any]:
    """Cold start, apart from the warm budget: the pipeline's build and the first request."""
    first = timings[0] if timings else None
    return {
        "build_ms": None if build_ns is None else ns_to_ms(build_ns),
        "first_request_ms": None if first is None else ns_to_ms(first.end_ns - first.start_ns),
        "first_request_ok": None if first is None else first.failure is None,
    }


class TracedTimeout(BaseException):
    """Raised into the main thread by SIGALRM (:func:`_alarm`), a BaseException so stage code's
    ``except Exception`` lets it by; ``failure``: the stage of the traced run past ``timeout_s``."""

    failure: StageFailure | None = None


@contextlib.contextmanager
def _alarm(timeout_s: float | None) -> Iterator[Callable[[float], Any]]:
    """``alarm(seconds)`` raising :class:`TracedTimeout` by SIGALRM; a no-op off the main thread."""
    usable = (
        timeout_s is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield lambda seconds: None
        return

    def ring(signum, frame):
        raise TracedTimeout()

    previous = signal.signal(signal.SIGALRM, ring)
    try:
        yield functools.partial(signal.setitimer, signal.ITIMER_REAL)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _traced_requests(
    plan: MeasurePlan, pipe: Pipeline, items, out_dir: Path, alarm: Callable[[float], Any]
) -> tuple[Path, dict[str, Any]]:
    torch = require_torch()
    quiet_profiler()
    profiler = torch.profiler
    n, cancel, progress = plan.traced, plan.cancel, plan.progress
    cuda = pipe.config.is_cuda
    kinds = ["cpu", "cuda"] if cuda else ["cpu"]
    stages = [(stage_range_name(s.name), s.name, traced_fn(s)) for s in pipe.stages]
    failures: list[StageFailure] = []
    memory = StageMemory(torch if cuda else None, pipe.config.device)
    with profiler.profile(
        activities=[getattr(profiler.ProfilerActivity, k.upper()) for k in kinds],
        schedule=profiler.schedule(wait=0, warmup=1, active=n, repeat=1),
        on_trace_ready=profiler.tensorboard_trace_handler(str(out_dir), use_gzip=True),
        with_stack=plan.stacks,
        record_shapes=plan.shapes,
        with_modules=plan.modules,
    ) as prof:
        for i in range(n + 1):
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"cancelled during the traced run ({i} of {n + 1})")
            batch = next_batch(items, pipe.config.batch_size, pipe.name)
            failures += _traced_request(plan.timeout_s, stages, batch, memory.measure, alarm, i > 0)
            if cuda:
                torch.cuda.synchronize()
            prof.step()
            if progress is not None:
                progress(i + 1, n + 1, "traced")
    files = sorted(out_dir.glob("*.pt.trace.json.gz"))
    if not files:
        raise PipelineError("torch.profiler wrote no trace file")
    return files[-1], {
        "requests": n,
        "profiler_warmup": 1,
        "activities": kinds,
        "failed_requests": len(failures),
        "failures": failure_records(failures),
        "with_stack": plan.stacks,
        "record_shapes": plan.shapes,
        "with_modules": plan.modules,
        "memory_by_stage": memory.summary(),
    }


def _traced_request(timeout_s, stages, out, measure, alarm, counted: bool) -> list[StageFailure]:
    """One request through ``stages`` (range, name, function): the failure that ended it, if any."""
    record_function = require_torch().profiler.record_function
    for range_name, name, fn in stages:
        try:
            alarm(timeout_s)
            with measure(name, counted=counted), record_function(range_name):
                out = fn(out)
            alarm(0)
        except TracedTimeout as stop:
            late = f"ran past the timeout of {timeout_s:g} s"
            stop.failure = StageFailure(name, TIMEOUT, f"stage {name!r} of the traced run {late}")
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # recorded like the timing run's failures (sys.exit too)
            alarm(0)
            return [StageFailure.from_exception(name, exc)]
    return []


def failure_records(failures: list[StageFailure]) -> list[dict[str, Any]]:
    """Distinct failures, first seen first: ``[{stage, type, message, where, count}]``."""
    counts = collections.Counter((f.stage, f.error_type, f.message, f.where) for f in failures)
    return [
        {"stage": s, "type": t, "message": m, "where": w, "count": c}
        for (s, t, m, w), c in counts.items()
    ]


def environment(config: PipelineConfig) -> dict[str, Any]:
    """Where the run happened: versions, device and CPU model, thread count."""
    torch = require_torch()
    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": platform.node(),
        "pid": os.getpid(),
        "torch": torch.__version__,
        "cpu_model": cpu_model(),
        "threads": torch.get_num_threads(),
        "device": config.device,
        "device_name": device_name(config.device),
    }
    if config.is_cuda:
        env["cuda"] = torch.version.cuda
        env["gpu_capability"] = ".".join(
            map(str, torch.cuda.get_device_capability(torch.device(config.device)))
        )
    return env
