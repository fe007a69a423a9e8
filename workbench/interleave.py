"""Interleaved comparison: two or more configurations of one pipeline, measured in one process.

Two runs made minutes apart differ by whatever the machine did in between
(another process, a throttled core); interleaving takes that out. Each
configuration gets its own built pipeline and the *same* input items. All are
warmed up first; then, for every round, the configurations run one block of
``BLOCK`` (10) requests each, in an order drawn from ``numpy``'s seeded
generator, until each has run ``requests`` measured requests. A block that
follows a block with another torch thread count starts with ``REWARM``
unmeasured requests (OpenMP's pool resizes and goes cold on a switch).

The samples (integer ns per stage and end to end) go to
:func:`workbench.analysis.verdicts.paired_comparison`, which pairs blocks by
round. ``compare(...)`` returns a :class:`Comparison`; ``.result`` is what
``python -m workbench compare --json`` prints.
"""
from __future__ import annotations

import dataclasses
import itertools
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .analysis.budget import END_TO_END
from .analysis.verdicts import BLOCK, MIN_EFFECT, RESAMPLES, paired_comparison
from .config import PipelineConfig
from .errors import ConfigError, PipelineError
from .timing import Clock, RequestTiming, time_request

REWARM = 3
# Measured requests per configuration. Four times profile's 600: on the 2-core VM at 600 a 10 % slower forward
# stage (60-120 us) came out `slower` in 88-90 of 100 seeded comparisons, because the VM's speed drifts within
# seconds and widens the paired interval. At 2,400 (benchmarks/bench_compare.py, 100 repetitions, quiet): 95 %
# (tabular) and 99 % (text), and no false alarm in 200 A-against-A comparisons (benchmarks/results/compare.md).
DEFAULT_COMPARE_REQUESTS = 2400
BUILT_IN_KEYS = ("batch_size", "precision", "threads", "device")


@dataclass
class Comparison:
    """What an interleaved comparison measured and concluded.

    configs: one dict per configuration (``label``, ``config``, ``requests``, ``failed``,
        ``errors``: exception type -> count).
    samples: one row per measured request: ``config`` (index into configs),
        ``round``, ``request`` (per configuration), ``ok``, ``error_type``, then
        one int ns column per stage and ``end_to_end`` (null where it did not run).
    result: the JSON report (``configs``, ``stages``, ``end_to_end``, ...), B against A.
    """

    pipeline: str
    stage_names: list[str]
    configs: list[dict[str, Any]]
    samples: pd.DataFrame
    result: dict[str, Any]


def config_with(base: PipelineConfig, overrides: Mapping[str, Any]) -> PipelineConfig:
    """``base`` with built-in keys (batch_size, precision, threads, device) replaced, other keys added to options."""
    fields = {f.name for f in dataclasses.fields(PipelineConfig)}
    builtin = {k: v for k, v in overrides.items() if k in BUILT_IN_KEYS}
    if "threads" in builtin and "threads" not in fields:
        raise ConfigError("threads is not a PipelineConfig field in this version of the workbench")
    options = dict(base.options) | {k: v for k, v in overrides.items() if k not in BUILT_IN_KEYS}
    return base.replace(options=options, **builtin)


def config_label(overrides: Mapping[str, Any]) -> str:
    """``k=v,k=v`` with JSON values, as typed on the command line; ``base`` when empty."""
    import json

    return ",".join(f"{k}={json.dumps(v)}" for k, v in overrides.items()) or "base"


def compare(target: Callable | str, configs: Sequence[Mapping[str, Any] | PipelineConfig], *,
            base: PipelineConfig | None = None, requests: int = DEFAULT_COMPARE_REQUESTS, warmup: int = 10,
            seed: int = 0, metric: str = "p50", min_effect: float = MIN_EFFECT, resamples: int = RESAMPLES,
            clock: Clock = time.perf_counter_ns, noise_probe: Any = True) -> Comparison:
    """Run configurations of one pipeline interleaved in this process and compare each with the first.

    target: a factory ``build(config) -> Pipeline`` or a shipped example's name
        (a built Pipeline cannot be rebuilt per configuration and is refused).
    configs: two or more; each a PipelineConfig or a dict of overrides of ``base``.
    requests: measured requests per configuration (default :data:`DEFAULT_COMPARE_REQUESTS`, 2,400: what a
        10 % change of a stage's p50 needs to come out ``slower`` about 95 % of the time on a quiet 2-core VM,
        see ``benchmarks/bench_compare.py``); warmup: unmeasured first requests per configuration.
    metric: ``p50`` or ``p99``, which ratio the verdicts follow; min_effect: relative, e.g. 0.02.
    noise_probe: True measures the machine during the comparison (``workbench.noise.NoiseProbe``); or any
        object with ``start()`` and ``finish(torch_threads, e2e_ns)`` (tests inject one); False skips it
        (noise unknown). All sides ran in the same window, so a noisy window makes every verdict
        ``too noisy to tell``.
    """
    _check(configs, requests, warmup)
    base = base or PipelineConfig()
    cfgs = [c if isinstance(c, PipelineConfig) else config_with(base, c) for c in configs]
    labels = [_label(c, base) for c in configs]
    if any(getattr(c, "threads", None) for c in cfgs):
        from .device import require_torch

        require_torch()  # a thread count is set through torch
    pipes = _build_all(target, cfgs)
    names = pipes[0].stage_names
    items = _shared_items(pipes, requests + warmup)
    default_threads = _current_threads()
    runners = [_request_runner(p, clock) for p in pipes]
    threads = [getattr(p.config, "threads", None) or default_threads for p in pipes]
    try:
        _warm_up(pipes, runners, items, warmup, threads)
        # the machine is judged from here: lazy initialisation and torch.compile's worker processes in the
        # warm-up are the configurations' own start-up, not another process's load on the measurement
        probe = _noise_probe(noise_probe)
        rows = _interleave(pipes, runners, items, requests, warmup, seed, threads)
    finally:
        _set_threads(default_threads)
    samples = _samples_table(rows, names)
    used = [t for t in (getattr(p.config, "threads", None) or default_threads for p in pipes) if t]
    noise = _finish_noise(probe, samples, max(used) if used else None)
    info = _config_info(cfgs, labels, samples)
    result = _report(samples, names, info, metric=metric, min_effect=min_effect, resamples=resamples, seed=seed,
                     requests=requests, noise=noise)
    return Comparison(pipes[0].name, names, info, samples, result)


def _check(configs, requests, warmup) -> None:
    if len(configs) < 2:
        raise ConfigError(f"compare needs at least two configurations, got {len(configs)}")
    for name, value, low in (("requests", requests, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")


def _label(config, base: PipelineConfig) -> str:
    if isinstance(config, PipelineConfig):
        d, b = config.to_dict(), base.to_dict()
        return config_label({k: v for k, v in d.items() if v != b.get(k)})
    return config_label(config)


def _build_all(target, cfgs: list[PipelineConfig]) -> list:
    from .pipeline import Pipeline
    from .runner import resolve_pipeline

    if isinstance(target, Pipeline):
        raise ConfigError("compare needs a factory or an example name, not a built Pipeline: "
                          "each configuration is built from its own config")
    pipes = [resolve_pipeline(target, cfg) for cfg in cfgs]
    for i, p in enumerate(pipes[1:], start=1):
        if p.name != pipes[0].name or p.stage_names != pipes[0].stage_names:
            raise ConfigError(f"configuration {i} builds pipeline {p.name!r} with stages {p.stage_names}, "
                              f"configuration 0 {pipes[0].name!r} with {pipes[0].stage_names}: not comparable")
    return pipes


def _shared_items(pipes, calls: int) -> list:
    """The first configuration's items, enough for the largest batch size: every configuration sees the same."""
    need = calls * max(p.config.batch_size for p in pipes)
    items = list(itertools.islice(pipes[0].item_iterator(), need))
    if len(items) < need:
        raise PipelineError(f"pipeline {pipes[0].name!r}: item source ran out (got {len(items)} of {need} items)")
    return items


def _current_threads() -> int | None:
    if "torch" not in sys.modules:
        return None
    return sys.modules["torch"].get_num_threads()


def _set_threads(n: int | None) -> None:
    if n is not None and "torch" in sys.modules and sys.modules["torch"].get_num_threads() != n:
        sys.modules["torch"].set_num_threads(n)


def _request_runner(pipe, clock: Clock) -> Callable[[list], RequestTiming]:
    names, fns = pipe.stage_names, [s.fn for s in pipe.stages]
    if pipe.config.is_cuda:
        from .timing import CudaStageTimer

        timer = CudaStageTimer(len(fns), "stage", clock)
        return lambda batch: timer.time_request(names, fns, batch)
    return lambda batch: time_request(names, fns, batch, clock)


def _warm_up(pipes, runners, items, warmup, threads) -> None:
    """``warmup`` requests per configuration, each with its own thread count, on the first items."""
    for c, run in enumerate(runners):
        batch = pipes[c].config.batch_size
        _set_threads(threads[c])
        for i in range(warmup):
            run(items[i * batch:(i + 1) * batch])


def _interleave(pipes, runners, items, requests, warmup, seed, threads) -> list[tuple]:
    """Rounds of one block per configuration in a seeded order, after the warm-up; rows of samples."""
    batch = [p.config.batch_size for p in pipes]
    rng, done, rows = np.random.default_rng(seed), [0] * len(pipes), []
    for rnd in range(-(-requests // BLOCK)):
        for c in rng.permutation(len(pipes)).tolist():
            if _current_threads() != threads[c]:
                _set_threads(threads[c])
                for i in range(REWARM):
                    runners[c](items[i * batch[c]:(i + 1) * batch[c]])
            for _ in range(min(BLOCK, requests - done[c])):
                k = warmup + done[c]
                rows.append((c, rnd, done[c], runners[c](items[k * batch[c]:(k + 1) * batch[c]])))
                done[c] += 1
    return rows


def _samples_table(rows: list[tuple], names: list[str]) -> pd.DataFrame:
    records = []
    for config, rnd, request, t in rows:
        durs = [e - s for s, e in zip(t.stage_start_ns, t.stage_end_ns)]
        durs += [None] * (len(names) - len(durs))
        records.append((config, rnd, request, t.failure is None, t.failure and t.failure.error_type,
                        *durs, t.end_ns - t.start_ns))
    df = pd.DataFrame(records, columns=["config", "round", "request", "ok", "error_type", *names, END_TO_END])
    for col in (*names, END_TO_END):
        df[col] = df[col].astype("Int64")
    return df


def _config_info(cfgs, labels, samples: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for c, (cfg, label) in enumerate(zip(cfgs, labels)):
        mine = samples[samples["config"] == c]
        errors = mine.loc[~mine["ok"], "error_type"].value_counts()
        out.append({"label": label, "config": cfg.to_dict(), "requests": int(len(mine)),
                    "failed": int((~mine["ok"]).sum()), "errors": {str(k): int(v) for k, v in errors.items()}})
    return out


def _noise_probe(noise_probe: Any):
    if noise_probe is False or noise_probe is None:
        return None
    if noise_probe is True:
        try:
            from .noise import NoiseProbe
        except ImportError:  # an older workbench without noise measurement
            return None
        noise_probe = NoiseProbe()
    return noise_probe.start()


def _finish_noise(probe, samples: pd.DataFrame, threads: int | None) -> dict[str, Any] | None:
    """The window's noise record (``noisy`` True/False/None), judged with the most torch threads any side used."""
    if probe is None:
        return None
    e2e = samples.loc[samples["ok"], END_TO_END].to_numpy("int64")
    return probe.finish(threads, e2e)


def _report(samples, names, info, *, metric, min_effect, resamples, seed, requests, noise) -> dict[str, Any]:
    """The JSON report: B (the second configuration) against A; with more, ``comparisons`` holds each against A."""
    comparisons = []
    for b in range(1, len(info)):
        if info[0]["failed"] == info[0]["requests"] or info[b]["failed"] == info[b]["requests"]:
            comparisons.append({"a": 0, "b": b, "stages": [], "end_to_end": None,
                                "error": "every measured request of one side failed"})
            continue
        found = paired_comparison(samples, names, a=0, b=b, metric=metric, min_effect=min_effect,
                                  noisy=bool(noise and noise.get("noisy")), resamples=resamples, seed=seed)
        comparisons.append({"a": 0, "b": b, **found})
    report = {"kind": "interleaved", "pipeline_stages": names, "configs": info, "metric": metric,
              "min_effect": min_effect, "requests": requests, "block": BLOCK, "seed": seed, "resamples": resamples,
              "noise": noise, "stages": comparisons[0]["stages"], "end_to_end": comparisons[0]["end_to_end"]}
    if "error" in comparisons[0]:
        report["error"] = comparisons[0]["error"]
    if len(comparisons) > 1:
        report["comparisons"] = comparisons
    return report

