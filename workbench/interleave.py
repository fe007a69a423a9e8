"""Interleaved comparison: configurations of one pipeline, each in its own worker process.

Why and where they run: README "Compare two configurations", :mod:`workbench.interleave_workers`.
After the warm-up, every round runs one block of ``BLOCK`` requests per configuration in a seeded
order, until ``requests``, every interval of B against A is narrower than ``resolution`` (from
``MIN_ROUNDS`` on), or ``max_time_s``; :func:`~workbench.analysis.verdicts.paired_comparison` pairs
blocks by round.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .analysis.budget import END_TO_END
from .analysis.outputs import OUTPUT_ITEMS
from .analysis.tokens import paired_tokens
from .analysis.verdicts import BLOCK, MIN_EFFECT, RESAMPLES, VerdictOptions, paired_comparison
from .config import PipelineConfig
from .errors import ConfigError, PipelineError, check_int, is_number
from .interleave_workers import REWARM, Local, Workers, recipe_of  # noqa: F401 (REWARM: public here)
from .noise import NoiseProbe, Readings
from .examples import factory
from .pipeline import Pipeline
from .timing import Clock
from .units import ns_to_s, s_to_ns

# a fixed length that finds a 10 % slower stage on a quiet machine (benchmarks/results/compare.md);
# the default is adaptive (DEFAULT_RESOLUTION, DEFAULT_MAX_TIME_S): a busy machine needs more rounds
DEFAULT_COMPARE_REQUESTS = 2400
DEFAULT_RESOLUTION = 0.05  # every interval narrower than this (ratio units) ends the rounds
DEFAULT_MAX_TIME_S = 120.0
MIN_ROUNDS = 30
CHECK_RESAMPLES = 200
BUILT_IN_KEYS = ("batch_size", "precision", "threads", "device")


@dataclass
class Comparison:
    """What an interleaved comparison measured and concluded.

    configs: per configuration ``label``, ``config``, ``requests``, ``failed``, ``errors`` (type ->
        count), ``outputs`` (its final outputs against A's, :mod:`workbench.analysis.outputs`).
    samples: per measured request ``config`` (index), ``round``, ``request``, ``ok``,
        ``error_type``, then int ns per stage and ``end_to_end`` (null where it did not run).
    result: the JSON report of ``compare --json``, B against A.
    """

    pipeline: str
    stage_names: list[str]
    configs: list[dict[str, Any]]
    samples: pd.DataFrame
    result: dict[str, Any]


def config_with(base: PipelineConfig, overrides: Mapping[str, Any]) -> PipelineConfig:
    """``base`` with built-in keys replaced, other keys added to its options."""
    builtin = {k: v for k, v in overrides.items() if k in BUILT_IN_KEYS}
    options = dict(base.options) | {k: v for k, v in overrides.items() if k not in BUILT_IN_KEYS}
    return base.replace(options=options, **builtin)


@dataclass(frozen=True)
class CompareOptions:
    """How :func:`compare` measures and judges, beyond the configurations.

    requests: measured requests per configuration; None: adaptive (``resolution``, ``max_time_s``).
    metric: ``p50`` or ``p99``, the ratio the verdicts follow; min_effect: relative, e.g. 0.02.
    clock: the ns clock of the stages and of ``max_time_s`` (tests inject one).
    noise_probe: True measures the machine (``workbench.noise.NoiseProbe``), or an object with
        ``start()`` and ``finish(torch_threads, e2e_ns)``; False skips it.
    processes: None: worker processes where possible, else this process; True: workers or a
        ConfigError; False: this process.
    """

    requests: int | None = None
    warmup: int = 10
    seed: int = 0
    metric: str = "p50"
    min_effect: float = MIN_EFFECT
    resamples: int = RESAMPLES
    clock: Clock = time.perf_counter_ns
    noise_probe: Any = True
    processes: bool | None = None
    resolution: float = DEFAULT_RESOLUTION
    max_time_s: float = DEFAULT_MAX_TIME_S

    def __post_init__(self) -> None:
        if self.requests is not None:
            check_int("requests", self.requests, 1)
        check_int("warmup", self.warmup, 0)
        if not (is_number(self.resolution) and 0 < self.resolution < 10):
            raise ConfigError(
                f"resolution must be a ratio width in (0, 10), e.g. 0.05, got {self.resolution!r}"
            )
        if not (is_number(self.max_time_s) and 0 < self.max_time_s < 1e7):
            raise ConfigError(
                f"max_time_s must be a number of seconds > 0, got {self.max_time_s!r}"
            )


def compare(
    target: Callable | str,
    configs: Sequence[Mapping[str, Any] | PipelineConfig],
    options: CompareOptions | None = None,
    *,
    base: PipelineConfig | None = None,
    **overrides,
) -> Comparison:
    """Run configurations (two or more, each a PipelineConfig or a dict of overrides of ``base``) of
    one pipeline interleaved and compare each with the first; ``target``: a factory or an example's
    name; ``options``: :class:`CompareOptions`, its fields also keywords (``requests=600``)."""
    if len(configs) < 2:
        raise ConfigError(f"compare needs at least two configurations, got {len(configs)}")
    opts = dataclasses.replace(options or CompareOptions(), **overrides)
    base = base or PipelineConfig()
    cfgs = [c if isinstance(c, PipelineConfig) else config_with(base, c) for c in configs]
    labels = [_label(c, base) for c in configs]
    recipe, note = _recipe(target, opts.processes, opts.clock)
    cap = opts.warmup * max(c.batch_size for c in cfgs) + OUTPUT_ITEMS  # outputs kept below
    build = factory(target) if isinstance(target, str) else target
    sides = (
        Workers(recipe, cfgs, labels, opts.warmup, cap)
        if recipe
        else Local(build, cfgs, opts.warmup, opts.clock, cap)
    )
    try:
        samples, noise, stop = _measure(sides, len(cfgs), opts)
        agreement = sides.agreement()
    finally:
        sides.close()
    info = _config_info(cfgs, labels, samples)
    result = _report(samples, sides.names, info, opts, noise)
    result["stopped"] = stop.report()
    result["processes"] = "one per configuration" if recipe else "one"
    result["processes_note"] = note
    for entry, config in zip(agreement, info):  # A's, the reference: nulls
        config["outputs"] = entry
    for comp in result.get("comparisons") or []:
        comp["outputs"] = agreement[comp["b"]]
    result["outputs"] = agreement[1]
    return Comparison(sides.pipeline, sides.names, info, samples, result)


def _measure(sides, n_configs: int, opts: CompareOptions) -> tuple[pd.DataFrame, Any, _Stop]:
    """Warm-up, then the rounds: ``(samples, noise, stop)``."""
    sides.warm_up()
    # the machine is judged from here: the warm-up's start-up work is the configurations' own
    probe = opts.noise_probe  # the workers' readings count their CPU as this run's own
    probe = NoiseProbe(sides.readings or Readings()) if probe is True else probe
    probe = None if probe is None or probe is False else probe.start()
    stop = _Stop(opts, sides.names)
    rows = _interleave(sides, n_configs, opts.warmup, opts.seed, stop)
    samples = _samples_table(rows, sides.names)
    e2e = samples.loc[samples["ok"], END_TO_END].to_numpy("int64")
    threads = max(filter(None, sides.threads), default=None)
    return samples, None if probe is None else probe.finish(threads, e2e), stop


class _Stop:
    """When the rounds end: a fixed ``requests``, or adaptive (``resolution`` / ``max_time_s``)."""

    def __init__(self, opts: CompareOptions, names: list[str]) -> None:
        self.requests, self.resolution = opts.requests, opts.resolution
        self.max_ns = s_to_ns(opts.max_time_s)
        self.clock, self.names, self.metric = opts.clock, names, opts.metric
        self.started, self.by, self.rounds = self.clock(), None, 0
        self.next_check, self.widest = MIN_ROUNDS, None

    def after_round(self, rows: list[tuple], n_configs: int) -> bool:
        """True when no further round should run (``self.by`` says why)."""
        self.rounds += 1
        if self.requests is not None:
            if self.rounds >= -(-self.requests // BLOCK):
                self.by = "requests"
            return self.by is not None
        if self.rounds >= self.next_check:
            self.next_check = max(self.rounds + 8, int(self.rounds * 1.25))
            self.widest = _widest_interval(rows, self.names, n_configs, self.metric)
            width = (self.widest or {}).get("width")
            if width is not None and width < self.resolution:
                self.by = "resolution"
        if self.by is None and self.clock() - self.started >= self.max_ns:
            self.by = "max_time"
        return self.by is not None

    def report(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "rounds": self.rounds,
            "seconds": round(ns_to_s(self.clock() - self.started), 3),
            "resolution": None if self.requests is not None else self.resolution,
            "max_time_s": None if self.requests is not None else ns_to_s(self.max_ns),
            "widest": self.widest,
        }


def _widest_interval(
    rows: list[tuple], names: list[str], n_configs: int, metric: str
) -> dict[str, Any] | None:
    """The widest ``metric`` interval of any B against A, ``{b, name, width}`` (None: not yet)."""
    samples = _samples_table(rows, names)
    widest, widest_width = None, -1.0
    for b in range(1, n_configs):
        try:
            found = paired_comparison(
                samples, names, a=0, b=b, metric=metric, resamples=CHECK_RESAMPLES
            )
        except ConfigError:  # a side with no successful request yet
            return None
        for e in [*found["stages"], found["end_to_end"]]:
            lo, hi = e[f"{metric}_ci"]
            width = math.inf if lo is None or hi is None else hi - lo
            if width > widest_width:
                finite = round(width, 6) if math.isfinite(width) else None
                widest, widest_width = {"b": b, "name": e["name"], "width": finite}, width
    return widest


def _label(config, base: PipelineConfig) -> str:
    """``k=v,k=v`` of what differs from ``base`` (JSON values), or ``base``."""
    if isinstance(config, PipelineConfig):
        d, b = config.to_dict(), base.to_dict()
        config = {k: v for k, v in d.items() if v != b.get(k)}
    return ",".join(f"{k}={json.dumps(v)}" for k, v in config.items()) or "base"


def _interleave(sides, n: int, warmup: int, seed: int, stop: _Stop) -> list[tuple]:
    """Rounds of a block per configuration in a seeded order until ``stop`` (whole rounds only)."""
    rng, done, rows, rnd = np.random.default_rng(seed), [0] * n, [], 0
    limit = stop.requests
    while True:
        this_round = []
        for c in rng.permutation(n).tolist():
            count = BLOCK if limit is None else min(BLOCK, limit - done[c])
            block = sides.block(c, warmup + done[c], count)
            if block is None:
                if limit is not None or not rows:
                    raise PipelineError(sides.ran_out())
                stop.by = "items"
                return rows
            this_round += [(c, rnd, done[c] + i, *r) for i, r in enumerate(block)]
            done[c] += len(block)
        rows += this_round
        rnd += 1
        if stop.after_round(rows, n):
            return rows


def _recipe(target, processes: bool | None, clock: Clock) -> tuple[str | None, str | None]:
    """``(recipe, None)`` for worker processes, ``(None, why)`` for this one."""
    if isinstance(target, Pipeline):
        raise ConfigError(
            "compare needs a factory or an example name, not a built Pipeline: "
            "each configuration is built from its own config"
        )
    if processes is False:
        return None, "one process asked for (processes=False): process-wide state is shared"
    recipe = recipe_of(target)
    if recipe is not None and clock is time.perf_counter_ns:
        return recipe, None
    name = getattr(target, "__qualname__", repr(target))
    why = (
        "an injected clock is this process's"
        if recipe
        else f"factory {name} cannot be rebuilt in a worker process (define it at module level)"
    )
    if processes:
        raise ConfigError(f"compare(processes=True): {why}")
    return None, (
        f"{why}: every configuration ran in this one process, so process-wide state one factory changes "
        "(the garbage collector, a module-level cache, a thread) reaches the others"
    )


def _samples_table(rows: list[tuple], names: list[str]) -> pd.DataFrame:
    """:class:`Comparison`'s ``samples``; streaming adds ``ttft``, ``tpot``, ``itl`` (ns)."""
    width = 5 + len(names)
    records = [(*r[:-2], *[None] * (width - len(r) + 2), r[-2]) for r in rows]
    df = pd.DataFrame(
        records, columns=["config", "round", "request", "ok", "error_type", *names, END_TO_END]
    )
    df = df.astype({col: "Int64" for col in (*names, END_TO_END)})
    tokens = [r[-1] for r in rows]
    if any(t is not None for t in tokens):
        df["ttft"] = pd.array([t and t[0] for t in tokens], dtype="Int64")
        tpot = [round(sum(t[1]) / len(t[1])) if t and t[1] else None for t in tokens]
        df["tpot"] = pd.array(tpot, dtype="Int64")
        df["itl"] = [t[1] if t else () for t in tokens]
    return df


def _config_info(cfgs, labels, samples: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for c, (cfg, label) in enumerate(zip(cfgs, labels)):
        mine = samples[samples["config"] == c]
        errors = mine.loc[~mine["ok"], "error_type"].value_counts()
        out.append(
            {
                "label": label,
                "config": cfg.to_dict(),
                "requests": int(len(mine)),
                "failed": int((~mine["ok"]).sum()),
                "errors": {str(k): int(v) for k, v in errors.items()},
            }
        )
    return out


def _report(samples, names, info, opts: CompareOptions, noise) -> dict[str, Any]:
    """The JSON report, B against A; with more, ``comparisons`` holds each against A."""
    judging = VerdictOptions(
        metric=opts.metric,
        min_effect=opts.min_effect,
        noisy=bool(noise and noise.get("noisy")),
        resamples=opts.resamples,
        seed=opts.seed,
    )
    comparisons = []
    for b in range(1, len(info)):
        if any(info[i]["failed"] == info[i]["requests"] for i in (0, b)):
            error = "every measured request of one side failed"
            comparisons.append({"a": 0, "b": b, "stages": [], "end_to_end": None, "error": error})
            continue
        found = paired_comparison(samples, names, a=0, b=b, options=judging)
        tokens = paired_tokens(samples, a=0, b=b, options=judging)
        comparisons.append({"a": 0, "b": b, **found, **({"tokens": tokens} if tokens else {})})
    report = {
        "kind": "interleaved",
        "pipeline_stages": names,
        "configs": info,
        "metric": opts.metric,
        "min_effect": opts.min_effect,
        "requests": max(c["requests"] for c in info),
        "block": BLOCK,
        "seed": opts.seed,
        "resamples": opts.resamples,
        "noise": noise,
        "stages": comparisons[0]["stages"],
        "end_to_end": comparisons[0]["end_to_end"],
    }
    report |= {k: comparisons[0][k] for k in ("tokens", "error") if comparisons[0].get(k)}
    if len(comparisons) > 1:
        report["comparisons"] = comparisons
    return report
