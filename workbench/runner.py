"""Profile a pipeline: a timing run for percentiles, then a separate traced run.

The timing run executes W warm-up requests (kept, flagged, never mixed into
percentiles) then N measured requests, with no profiler attached. The traced
run executes a few more requests under ``torch.profiler`` with every stage
inside ``record_function(stage_range_name(stage))``, and saves the trace the
way ``tensorboard_trace_handler`` names it (``{worker}.{time_ns}.pt.trace.json.gz``),
so TensorBoard's profiler plugin and Perfetto open it. The result is a
:class:`workbench.record.Run`.
"""
from __future__ import annotations

import itertools
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from .config import PipelineConfig
from .device import check_device, cpu_model, device_name, require_torch
from .errors import ConfigError, PipelineError, WorkbenchError
from .naming import stage_range_name
from .pipeline import Pipeline, build_pipeline
from .precision import check_precision
from .record import REQUEST_COLUMNS, SCRATCH_PREFIX, STAGE_COLUMNS, Run, typed_table
from .timing import SYNC_POLICIES, Clock, CudaStageTimer, RequestTiming, time_request

Progress = Callable[[int, int, str], None]


class Cancelled(WorkbenchError):
    """The run was cancelled (``cancel.is_set()`` became true)."""


def resolve_pipeline(target: Pipeline | Callable | str, config: PipelineConfig | None) -> Pipeline:
    """A built pipeline from a Pipeline, a factory, or an example name."""
    if isinstance(target, Pipeline):
        return target.validate()
    config = config or PipelineConfig()
    check_precision(config)  # an impossible combination is named even where the device is missing
    check_device(config.device)
    if isinstance(target, str):
        from .examples import factory

        target = factory(target)
    if not callable(target):
        raise PipelineError(f"expected a Pipeline, a factory or an example name, got {type(target).__name__}")
    return build_pipeline(target, config)


def profile(
    target: Pipeline | Callable | str,
    config: PipelineConfig | None = None,
    *,
    requests: int = 200,
    warmup: int = 10,
    traced: int = 5,
    sync: str = "stage",
    clock: Clock = time.perf_counter_ns,
    progress: Progress | None = None,
    cancel: Any = None,
) -> Run:
    """Measure a pipeline stage by stage and return the run (not yet saved).

    requests: measured requests (pipeline calls of ``batch_size`` items), >= 1.
    warmup: requests run first and reported apart, >= 0.
    traced: requests in the separate ``torch.profiler`` run (0 = no trace).
    sync: CUDA synchronization policy, see ``workbench.timing``.
    cancel: anything with ``is_set()`` (a ``threading.Event``); checked between requests.
    """
    _check_counts(requests, warmup, traced, sync)
    pipe = resolve_pipeline(target, config)
    cfg = pipe.config
    items = pipe.item_iterator()
    started = datetime.now(timezone.utc)
    timings = _timing_run(pipe, items, warmup + requests, sync, clock, progress, cancel)
    requests_df, stages_df = _tables(timings, pipe.stage_names, warmup, cfg.batch_size)
    trace_path, trace_meta = None, None
    if traced:
        trace_path, trace_meta = _traced_run(pipe, items, traced, progress, cancel)
    meta = {
        "kind": "profile",
        "pipeline": pipe.name,
        "description": pipe.description,
        "stages": pipe.stage_names,
        "config": cfg.to_dict(),
        "env": environment(cfg),
        "created": started.isoformat(),
        "timing": {"warmup": warmup, "requests": requests, "clock": "time.perf_counter_ns",
                   "sync": sync if cfg.is_cuda else None,
                   "device_timer": "cuda_events" if cfg.is_cuda else None},
        "trace": trace_meta,
    }
    return Run(meta=meta, requests=requests_df, stages=stages_df, trace_path=trace_path)


def _check_counts(requests: int, warmup: int, traced: int, sync: str) -> None:
    for name, value, low in (("requests", requests, 1), ("warmup", warmup, 0), ("traced", traced, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    if sync not in SYNC_POLICIES:
        raise ConfigError(f"sync must be one of {', '.join(SYNC_POLICIES)}, got {sync!r}")


def next_batch(items, batch_size: int, pipe_name: str) -> list:
    batch = list(itertools.islice(items, batch_size))
    if len(batch) < batch_size:
        raise PipelineError(f"pipeline {pipe_name!r}: item source ran out (got {len(batch)} of {batch_size} items)")
    return batch


def _timing_run(pipe, items, total, sync, clock, progress, cancel) -> list[RequestTiming]:
    names, fns = pipe.stage_names, [s.fn for s in pipe.stages]
    if pipe.config.is_cuda:
        timer = CudaStageTimer(len(fns), sync, clock)
        run_one = lambda batch: timer.time_request(names, fns, batch)  # noqa: E731
    else:
        run_one = lambda batch: time_request(names, fns, batch, clock)  # noqa: E731
    out = []
    for i in range(total):
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"cancelled after {i} of {total} requests")
        out.append(run_one(next_batch(items, pipe.config.batch_size, pipe.name)))
        if progress is not None:
            progress(i + 1, total, "timing")
    return out


def _tables(timings: list[RequestTiming], names: list[str], warmup: int, batch_size: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Requests and stages tables, times relative to the first request's start."""
    origin = timings[0].start_ns if timings else 0
    req_rows, stage_rows = [], []
    for i, t in enumerate(timings):
        f = t.failure
        req_rows.append((i, i < warmup, t.start_ns - origin, t.end_ns - t.start_ns, f is None,
                         f and f.stage, f and f.error_type, f and f.message, batch_size))
        for k, (s, e) in enumerate(zip(t.stage_start_ns, t.stage_end_ns)):
            dev = t.device_ns[k] if t.device_ns is not None else None
            stage_rows.append((i, names[k], k, s - origin, e - s, dev))
    requests = pd.DataFrame(req_rows, columns=list(REQUEST_COLUMNS))
    stages = pd.DataFrame(stage_rows, columns=list(STAGE_COLUMNS))
    return typed_table(requests, REQUEST_COLUMNS), typed_table(stages, STAGE_COLUMNS)


def _traced_run(pipe: Pipeline, items, n: int, progress, cancel) -> tuple[Path, dict[str, Any]]:
    """Run n requests (after one profiler warm-up request) under torch.profiler; return the trace file."""
    torch = require_torch()
    from torch.profiler import ProfilerActivity, record_function, schedule, tensorboard_trace_handler

    cuda = pipe.config.is_cuda
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    out_dir = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    stages = [(stage_range_name(s.name), s.fn) for s in pipe.stages]
    errors = 0
    with torch.profiler.profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=n, repeat=1),
        on_trace_ready=tensorboard_trace_handler(str(out_dir), use_gzip=True),
    ) as prof:
        for i in range(n + 1):
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"cancelled during the traced run ({i} of {n + 1})")
            out = next_batch(items, pipe.config.batch_size, pipe.name)
            try:
                for range_name, fn in stages:
                    with record_function(range_name):
                        out = fn(out)
            except Exception:
                errors += 1  # the timing run records failures; here we only count them
            if cuda:
                torch.cuda.synchronize()
            prof.step()
            if progress is not None:
                progress(i + 1, n + 1, "traced")
    files = sorted(out_dir.glob("*.pt.trace.json.gz"))
    if not files:
        raise PipelineError("torch.profiler wrote no trace file")
    activity_names = ["cpu"] + (["cuda"] if cuda else [])
    return files[-1], {"requests": n, "profiler_warmup": 1, "activities": activity_names, "failed_requests": errors}


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
        env["gpu_capability"] = ".".join(map(str, torch.cuda.get_device_capability(torch.device(config.device))))
    return env
