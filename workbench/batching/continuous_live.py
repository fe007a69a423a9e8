"""A live continuous batching run: a generative pipeline's step API driven by the token-level rule.

``load`` of a pipeline with a step API (``Pipeline.steps``) runs this on the caller's thread:
between steps it queues the requests now due, then admits, plans and runs a step with
:class:`~.continuous.Scheduler`; every token is stamped with its step's end. The run is a ``load``
:class:`workbench.record.Run` with stages ``queue_wait`` and ``generate`` and a ``units`` table;
``load.continuous`` holds the policy, step counts and the step model fitted to the run's steps.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from ..device import torch_threads
from ..errors import ConfigError
from ..fingerprint import run_fingerprint
from ..guard import Interrupted
from ..noise import NoiseProbe, Readings
from ..runner import environment
from ..record import Load, Run
from ..record.meta import STATUS_COMPLETE, STATUS_INTERRUPTED
from ..timing import Clock, StageFailure, collect_set_up_garbage, stream_index
from ..units import ns_to_s, s_to_ns
from .arrivals import Arrivals
from .continuous import (
    FEATURES,
    STAGES,
    ContinuousPolicy,
    Scheduler,
    Seq,
    DRAINED,
    STREAM_STAGE,
    TokenLog,
    fit_step_times,
)
from .summary import lag_summary, pipeline_run_meta

STOPPED = StageFailure(
    STREAM_STAGE, "RunStopped", "not finished when the run was interrupted (Ctrl-C)"
)
LEAD_NS = 2_000_000  # the schedule starts 2 ms after the warm-up (and the executor threads are up)
WARMUP_STEPS = 3


def refuse_without_steps(pipe, asked: bool) -> None:
    """A streaming pipeline without a step API is refused (load cannot time its tokens), and so are
    the continuous options on a pipeline without one."""
    if pipe.steps is not None:
        return
    stream = stream_index(pipe.stages)
    if stream is not None:
        raise ConfigError(
            f"pipeline {pipe.name!r}: stage {pipe.stage_names[stream]!r} streams its answer "
            "(stream=True) but the pipeline offers no step API (Pipeline.steps: join, prefill, "
            "decode, leave); load schedules tokens through one: add it, or use profile (TTFT, ITL, "
            "TPOT per request) or compare"
        )
    if asked:
        raise ConfigError(
            f"pipeline {pipe.name!r} offers no step API (Pipeline.steps): --max-num-seqs, "
            "--max-batched-tokens and --chunk-tokens apply to generative pipelines that offer one"
        )


def run_continuous(pipe, target, arrivals: Arrivals, items: list, opts) -> Run:
    """Run ``items`` (one per arrival) through ``pipe.steps`` under ``opts.continuous``, failing
    requests as :mod:`.live` does (``DrainTimeout``; on Ctrl-C ``RunStopped``, ``Interrupted``)."""
    # what the continuous run does not do yet is refused, not ignored
    if opts.timeout_s is not None:
        raise ConfigError(
            "--timeout-s guards the dynamic batcher's pipeline calls; a continuous batching run "
            "(a generative pipeline's steps) has no per-step guard yet: leave --timeout-s out"
        )
    if opts.watch is not None:
        raise ConfigError(
            "load --sweep does not sweep a continuous batching run yet; run load at each --rate, "
            "or simulate the rates (workbench.batching.continuous.goodput_curve)"
        )
    policy = opts.continuous or ContinuousPolicy()
    clock, drain_timeout_s = opts.clock, opts.drain_timeout_s
    threads = pipe.config.threads or torch_threads()
    steps = pipe.steps(policy.max_num_seqs)
    if items:
        _warm_up(steps, items[0])
    schedule = arrivals.times_ns()
    seqs = [Seq(i, int(t), *steps.lengths(x)) for i, (t, x) in enumerate(zip(schedule, items))]
    started = datetime.now(timezone.utc)
    probe = NoiseProbe(opts.noise_readings or Readings()).start()
    collect_set_up_garbage()
    origin = clock() + LEAD_NS
    deadline = (int(schedule[-1]) if len(schedule) else 0) + s_to_ns(drain_timeout_s)
    log, interrupted = TokenLog(), False
    try:
        drive(log, steps, seqs, items, policy, opts, origin, deadline)
    except KeyboardInterrupt:
        interrupted = True
    run = log.run(seqs, clock() - origin, STOPPED if interrupted else DRAINED)
    ok = run.requests["ok"]
    load = lag_summary(np.zeros(len(seqs), dtype=np.int64)) | {
        "requests": len(seqs),
        "failed": int((~ok).sum()),
        "throughput_rps": _throughput(run.requests),
        "arrivals": arrivals.params(),
        "policy": None,
        "drain_timeout_s": drain_timeout_s,
        "continuous": policy.params() | step_figures(run.steps),
    }
    env = environment(pipe.config)
    meta = pipeline_run_meta(
        pipe, "load", list(STAGES), started, len(run.requests), env, load=Load.from_dict(load)
    ).replace(
        status=STATUS_INTERRUPTED if interrupted else STATUS_COMPLETE,
        fingerprint=run_fingerprint(pipe, target, threads, env),
        noise=probe.finish(threads, run.requests.loc[ok, "dur_ns"].to_numpy()),
    )
    out = Run(meta=meta, requests=run.requests, stages=run.stages, units=run.units)
    if interrupted:
        raise Interrupted(out, f"interrupted after {int(ok.sum())} of {len(seqs)} requests")
    return out


def drive(log: TokenLog, steps, seqs, items, policy, opts, origin: int, deadline: int):
    """The loop of the module docstring, into ``log``, until all finished or ``deadline`` passed."""
    clock, sleep = opts.clock, opts.sleep
    sched, k = Scheduler(policy), 0
    while k < len(seqs) or sched.running or sched.waiting:
        now = clock() - origin
        if now > deadline:
            break
        while k < len(seqs) and seqs[k].arrival_ns <= now:
            sched.arrive(seqs[k])
            k += 1
        if not sched.running and not sched.waiting:
            sleep(ns_to_s(max(0, seqs[k].arrival_ns - now)))
            continue
        for s in sched.admit(now):
            s.handle = steps.join(items[s.request])
        step = sched.plan()
        start = clock() - origin
        if step.decode:  # the decodes in one call, then each prefill chunk
            steps.decode([s.handle for s in step.decode])
        for s, n in step.prefill:
            steps.prefill(s.handle, n)
        end = clock() - origin
        log.step(step, start, end)
        emitted, left = sched.advance(step)
        log.emit(emitted, end)
        for s in left:
            steps.leave(s.handle)


def step_figures(steps: pd.DataFrame) -> dict:
    """``steps``, ``mean_running`` (sequences a step), ``mean_step_tokens``, ``step_model`` and
    ``step_noise_ns`` (fitted to the run's own steps, to replay its scheduling in the simulator)."""
    if steps.empty:
        return {"steps": 0, "mean_running": None, "mean_step_tokens": None}
    tokens = steps["decode_seqs"] + steps["prefill_tokens"]
    running = steps["decode_seqs"] + steps["prefill_chunks"]
    model = fit_step_times(steps)
    return {
        "steps": int(len(steps)),
        "mean_running": float(running.mean()),
        "mean_step_tokens": float(tokens.mean()),
        "step_model": model.describe(),
        "step_noise_ns": list(model.noise_ns),
    }


def _throughput(requests: pd.DataFrame) -> float | None:
    ok = requests[requests["ok"]]
    span = int((ok["start_ns"] + ok["dur_ns"]).max() - requests["start_ns"].min()) if len(ok) else 0
    return len(ok) / ns_to_s(span) if span > 0 else None


def _warm_up(steps, item) -> None:
    """A few untimed steps of one sequence (first calls allocate and pick kernels)."""
    seq = steps.join(item)
    steps.prefill(seq, steps.lengths(item)[0])
    for _ in range(WARMUP_STEPS):
        steps.decode([seq])
    steps.leave(seq)


def profile_steps(
    steps,
    item_of,
    *,
    seqs=(1, 2, 4, 8),
    contexts=(16, 48),
    prompts=(8, 32, 128),
    repeat=5,
    clock: Clock = time.perf_counter_ns,
) -> pd.DataFrame:
    """Timed calls of the step API (``repeat`` each): decodes of ``seqs`` sequences at each context,
    prefills of ``prompts`` tokens; ``item_of(prompt_tokens, answer_tokens)`` makes a request.
    Columns ``dur_ns`` and the :data:`~.continuous.FEATURES`, what ``fit_step_times`` fits."""
    rows = []
    for n in prompts:
        for _ in range(repeat):
            seq = steps.join(item_of(n, 1))
            t0 = clock()
            steps.prefill(seq, n)
            rows.append((clock() - t0, 0, 0, 0, 1, n))
            steps.leave(seq)
    for b in seqs:
        for ctx in contexts:
            live = [steps.join(item_of(ctx, repeat + 1)) for _ in range(b)]
            for s in live:
                steps.prefill(s, ctx)
            for r in range(repeat):
                t0 = clock()
                steps.decode(live)
                rows.append((clock() - t0, 1, b, b * (ctx + 1 + r), 0, 0))
            for s in live:
                steps.leave(s)
    return pd.DataFrame(rows, columns=["dur_ns", *FEATURES], dtype="int64")
