"""Is a difference real? Ratios B/A of p50 and p99 with bootstrap intervals and a verdict.

Inputs are per-request durations in integer ns, grouped in *blocks*: the interleaved runner
(``workbench.interleave``) runs one block of 10 requests per configuration each round, so round
``r`` of A and of B share whatever the machine was doing then.

* **Ratio**: ``percentile(B) / percentile(A)`` of all successful requests (linear interpolation).
* **Interval**: block bootstrap, ``RESAMPLES`` resamples; *paired* (interleaved): one draw of
  round indices for both sides; *separate* (two saved runs): blocks of ``BLOCK`` consecutive
  requests drawn independently per run. Percentile interval of the resampled ratios.
* **Holm** across the stages and end to end (one family per metric): each ratio's bootstrap
  p-value is for "outside the no-effect band ``[1 - min_effect, 1 + min_effect]``". Sorted by
  p-value, the i-th of m is tested at ``alpha / (m - i)`` and its interval reported at that level;
  from the first not rejected on, all get that level and cannot be ``slower``/``faster``.
  ``*_ci_level`` names each interval's level; the smallest p-value, ``2 / (resamples + 1)``,
  allows about 50 stages.
* **Verdict**, first match wins, ``margin = min_effect`` (quiet) or ``max(min_effect, drift)``
  (noisy; ``drift = |ratio(second half) / ratio(first half) - 1|``): ``too noisy to tell``
  (interval not finite); ``slower`` (Holm rejected, interval above ``1 + margin``); ``faster``
  (below ``1 - margin``); ``too noisy to tell`` (noisy and the interval not inside
  ``[1 - margin, 1 + margin]``, or wider than ``MAX_CI_WIDTH`` in ratio units); ``no detectable
  difference``. Separate runs are judged as on a noisy machine, their interval widened by
  :func:`taken_apart` and their margin at least :func:`resolution`; a run flagged noisy is ``too
  noisy to tell``. ``verdict`` is the one of the metric ``metric`` names.
* **Gate** (:func:`gate_decision`, ``workbench gate``): ``regression`` when the verdict is
  ``slower`` and the ratio and the interval's low end are above ``1 + threshold``; ``no
  regression`` when the verdict is not ``too noisy to tell``, the high end is at most
  ``1 + threshold`` and (separate runs) the resolution at most the threshold; else ``inconclusive``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .tail import END_TO_END
from .stats import NS_PER_MS, percentiles, tail_summary_ns

BLOCK = 10
RESAMPLES = 2000
ALPHA = 0.05
MIN_EFFECT = 0.02
MAX_CI_WIDTH = 0.25
METRICS = {"p50": 50.0, "p99": 99.0}
VERDICTS = ("too noisy to tell", "slower", "faster", "no detectable difference")
TOO_NOISY, SLOWER, FASTER, NO_DIFFERENCE = VERDICTS


def round_blocks(values_ns: Sequence, rounds: Sequence[int]) -> np.ndarray:
    """A ``(rounds, longest block)`` float64 matrix of ns; rows in ascending round order, NaN pads and failures."""
    values = np.asarray(values_ns, dtype="float64")
    keys = np.asarray(rounds)
    if values.shape != keys.shape:
        raise ConfigError(f"round_blocks: {values.size} values but {keys.size} round numbers")
    labels, inverse = np.unique(keys, return_inverse=True)
    counts = np.bincount(inverse, minlength=labels.size)
    width = int(counts.max()) if values.size else 0
    out = np.full((labels.size, width), np.nan)
    order = np.argsort(inverse, kind="stable")  # each round's values in their original order
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    position = np.arange(values.size) - np.repeat(starts, counts)
    out[inverse[order], position] = values[order]
    return out


def consecutive_blocks(values_ns: Sequence, block: int = BLOCK) -> np.ndarray:
    """Blocks of ``block`` consecutive requests (a saved run's request order), as :func:`round_blocks`."""
    values = np.asarray(values_ns, dtype="float64")
    rows = -(-values.size // block)
    out = np.full(rows * block, np.nan)
    out[: values.size] = values
    return out.reshape(rows, block) if values.size else np.empty((0, 0))


def _percentile_rows(sample: np.ndarray, q: float) -> np.ndarray:
    """Each row's percentile of its non-NaN values (NaN for none), vectorised per value count."""
    present = ~np.isnan(sample)
    if present.all():
        return percentiles(sample, q, axis=1)
    ordered, counts = np.sort(sample, axis=1), present.sum(axis=1)
    out = np.full(sample.shape[0], np.nan)
    for n in np.unique(counts[counts > 0]):
        rows = counts == n
        out[rows] = percentiles(ordered[rows, :n], q, axis=1)
    return out


def _ratio(b: np.ndarray, a: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = b / a
    return np.where(np.isfinite(out), out, np.nan)


def point_ratio(blocks_a: np.ndarray, blocks_b: np.ndarray, q: float) -> float:
    """``percentile_q(B) / percentile_q(A)`` over all finite values; NaN when either side is empty or A is 0."""
    a, b = blocks_a[np.isfinite(blocks_a)], blocks_b[np.isfinite(blocks_b)]
    if a.size == 0 or b.size == 0:
        return math.nan
    return float(_ratio(percentiles(b, q), percentiles(a, q)))


# more blocks than this (5,000 requests): resample per-unit histograms (memory)
SUMMARY_ABOVE_BLOCKS = 500
SUMMARY_UNITS = 400
WINDOW_BINS = 256
# the percentile windows the histograms cover, per metric
WINDOWS = {50.0: (40.0, 60.0), 99.0: (97.0, 99.8)}


class Bootstrap:
    """Resampled ratios ``percentile_q(B*) / percentile_q(A*)``, the same draws for every stage.

    Up to :data:`SUMMARY_ABOVE_BLOCKS` blocks per side, a resample is a row of block indices per
    side. Past it (a million requests would need gigabytes of indices), consecutive blocks merge
    into :data:`SUMMARY_UNITS` units, each a histogram of :data:`WINDOW_BINS` bins over the side's
    percentile window (:data:`WINDOWS`) plus counts below and above; a resample draws multinomial
    unit counts, adds the histograms and interpolates the percentile inside its bin (clamped)."""

    def __init__(
        self, n_a: int, n_b: int, *, paired: bool, resamples: int = RESAMPLES, seed: int = 0
    ) -> None:
        self.summary = max(n_a, n_b) > SUMMARY_ABOVE_BLOCKS
        if not self.summary and (n_a < 1 or n_b < 1):
            raise ConfigError(
                f"need at least one block on each side to compare, got {n_a} and {n_b}"
            )
        if paired and n_a != n_b:
            raise ConfigError(
                f"paired comparison needs the same rounds on both sides, got {n_a} and {n_b}"
            )
        rng = np.random.default_rng(seed)
        uniform = np.full(SUMMARY_UNITS, 1.0 / SUMMARY_UNITS)

        def draw(n: int) -> np.ndarray:  # block indices, or unit counts when summarised
            if self.summary:
                return rng.multinomial(SUMMARY_UNITS, uniform, size=resamples).astype("float32")
            return rng.integers(0, n, size=(resamples, n))

        self.a = draw(n_a)
        self.b = self.a if paired else draw(n_b)

    def ratios(self, blocks_a: np.ndarray, blocks_b: np.ndarray, q: float) -> np.ndarray:
        """One ratio per resample (NaN where undefined)."""
        if self.summary:
            return _ratio(
                _resampled_percentiles(blocks_b, q, self.b),
                _resampled_percentiles(blocks_a, q, self.a),
            )
        sample_a = blocks_a[self.a].reshape(self.a.shape[0], -1)
        sample_b = blocks_b[self.b].reshape(self.b.shape[0], -1)
        with warnings.catch_warnings():  # an all-NaN resample gives NaN, counted as undefined
            warnings.simplefilter("ignore", RuntimeWarning)
            return _ratio(_percentile_rows(sample_b, q), _percentile_rows(sample_a, q))


def unit_histograms(
    blocks: np.ndarray, q: float, units: int = SUMMARY_UNITS
) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, edges)``: per unit of blocks, counts below the window, per bin, above"""
    unit_of_block = np.arange(blocks.shape[0]) * units // max(blocks.shape[0], 1)
    values, unit = blocks.ravel(), np.repeat(unit_of_block, blocks.shape[1])
    keep = np.isfinite(values)
    values, unit = values[keep], unit[keep]
    if values.size == 0:
        return np.zeros((units, WINDOW_BINS + 2), dtype="float32"), np.zeros(WINDOW_BINS + 1)
    lo, hi = percentiles(values, WINDOWS[q])
    edges = np.linspace(lo, hi, WINDOW_BINS + 1)
    # below the window: column 0, above it: the last; only the values inside are searched (20 % for
    # p50's window, 3 % for p99's), the columns searchsorted gives every value
    column = np.where(values < lo, 0, WINDOW_BINS + 1)
    inside = (values >= lo) & (values <= hi)
    column[inside] = np.searchsorted(edges, values[inside], side="right")
    column[(values == hi) & (hi > lo)] = WINDOW_BINS  # the window's top value is in the last bin
    counts = np.bincount(unit * (WINDOW_BINS + 2) + column, minlength=units * (WINDOW_BINS + 2))
    return counts.reshape(units, WINDOW_BINS + 2).astype("float32"), edges


def _resampled_percentiles(blocks: np.ndarray, q: float, weights: np.ndarray) -> np.ndarray:
    counts, edges = unit_histograms(blocks, q, weights.shape[1])
    pooled = weights @ counts  # resamples x (below, bins..., above)
    total = pooled.sum(axis=1)
    rank = q / 100.0 * (total - 1.0)  # 0-based rank of the linear-interpolation percentile
    cum = np.cumsum(pooled, axis=1)
    col = np.argmax(cum > rank[:, None], axis=1)
    before = np.where(col > 0, cum[np.arange(col.size), np.maximum(col - 1, 0)], 0.0)
    inside = pooled[np.arange(col.size), col]
    frac = np.where(inside > 0, (rank - before + 0.5) / np.maximum(inside, 1.0), 0.0)
    bin_ = np.clip(col - 1, 0, WINDOW_BINS - 1)
    value = edges[bin_] + np.clip(frac, 0.0, 1.0) * (edges[bin_ + 1] - edges[bin_])
    value = np.where(col == 0, edges[0], np.where(col == WINDOW_BINS + 1, edges[-1], value))
    return np.where(total > 0, value, np.nan)


def band_p_value(ratios: np.ndarray, min_effect: float) -> float:
    """Bootstrap p-value that the ratio lies outside ``[1 - min_effect, 1 + min_effect]`` (1.0 when undefined)."""
    r = ratios[np.isfinite(ratios)]
    if r.size == 0:
        return 1.0
    below_top = np.count_nonzero(r <= 1.0 + min_effect)
    above_bottom = np.count_nonzero(r >= 1.0 - min_effect)
    return min(1.0, 2.0 * (min(below_top, above_bottom) + 1) / (r.size + 1))


def holm_intervals(
    ratios: Mapping[str, np.ndarray], *, min_effect: float = MIN_EFFECT, alpha: float = ALPHA
) -> dict[str, dict[str, Any]]:
    """Per name: ``{"ci": (lo, hi), "level", "p_value", "rejected"}``, Holm step-down (see module docstring)."""
    p_values = {name: band_p_value(r, min_effect) for name, r in ratios.items()}
    order = sorted(p_values, key=p_values.get)
    m, stop_alpha, out = len(order), None, {}
    for i, name in enumerate(order):
        level_alpha = stop_alpha if stop_alpha is not None else alpha / (m - i)
        rejected = stop_alpha is None and p_values[name] < level_alpha
        if not rejected and stop_alpha is None:
            stop_alpha = level_alpha
        r = ratios[name][np.isfinite(ratios[name])]
        bounds = [level_alpha / 2, 1 - level_alpha / 2]
        lo, hi = np.quantile(r, bounds) if r.size else (math.nan, math.nan)
        out[name] = {
            "ci": (float(lo), float(hi)),
            "level": 1.0 - level_alpha,
            "p_value": p_values[name],
            "rejected": bool(rejected),
        }
    return out


def verdict(
    ci: tuple[float, float],
    *,
    rejected: bool = True,
    noisy: bool = False,
    min_effect: float = MIN_EFFECT,
    max_width: float = MAX_CI_WIDTH,
    drift: float = 0.0,
) -> str:
    """The verdict of one ratio interval (module docstring); ``drift``: relative, NaN unmeasured."""
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return TOO_NOISY
    margin = max(min_effect, drift if math.isfinite(drift) else math.inf) if noisy else min_effect
    if math.isinf(margin):
        return TOO_NOISY
    if rejected and lo > 1.0 + margin:
        return SLOWER
    if rejected and hi < 1.0 - margin:
        return FASTER
    if hi - lo > max_width or (noisy and not (1.0 - margin <= lo and hi <= 1.0 + margin)):
        return TOO_NOISY
    return NO_DIFFERENCE


REGRESSION, NO_REGRESSION, INCONCLUSIVE = "regression", "no regression", "inconclusive"


def gate_decision(
    ratio: float,
    ci: Sequence[float],
    metric_verdict: str,
    threshold: float,
    *,
    resolution: float | None = None,
) -> str:
    """``regression``, ``no regression`` or ``inconclusive`` for one metric (module docstring);
    ``threshold``: the allowed relative slow-down; ``resolution``: separate runs' (None: paired)."""
    lo, hi = ci
    limit = 1.0 + threshold
    if metric_verdict == SLOWER and ratio > limit and lo > limit:
        return REGRESSION
    resolved = resolution is None or resolution <= threshold
    if metric_verdict != TOO_NOISY and hi <= limit and resolved:
        return NO_REGRESSION
    return INCONCLUSIVE


def _ms(blocks: np.ndarray, q: float) -> float | None:
    v = blocks[np.isfinite(blocks)]
    return round(float(percentiles(v, q)) / NS_PER_MS, 6) if v.size else None


def _r(x: float) -> float | None:
    return round(float(x), 4) if math.isfinite(x) else None


def _tail(blocks: np.ndarray) -> dict[str, float | int | None]:
    """``{count}`` and :func:`stats.tail_summary_ns` of a block matrix's finite values."""
    values = blocks[np.isfinite(blocks)].astype(np.int64)
    return {"count": int(values.size)} | tail_summary_ns(values)


@dataclass(frozen=True)
class VerdictOptions:
    """How :func:`compare_blocks` judges B against A; ``widen``: separate runs' interval factor
    (``[lo / widen, hi * widen]``, :func:`taken_apart`)."""

    metric: str = "p50"
    min_effect: float = MIN_EFFECT
    noisy: bool = False
    resamples: int = RESAMPLES
    seed: int = 0
    alpha: float = ALPHA
    widen: float = 1.0


def compare_blocks(
    blocks_a: Mapping[str, np.ndarray],
    blocks_b: Mapping[str, np.ndarray],
    names: Sequence[str],
    *,
    paired: bool,
    options: VerdictOptions | None = None,
    **overrides,
) -> dict[str, Any]:
    """``{"stages": [entry per stage], "end_to_end": entry}``, B against A (ENTRY in docs/json.md),
    from name -> block matrix (ns, :func:`round_blocks`); ``overrides``: :class:`VerdictOptions`."""
    opts = replace(options or VerdictOptions(), **overrides)
    if opts.metric not in METRICS:
        raise ConfigError(f"metric must be one of {', '.join(METRICS)}, got {opts.metric!r}")
    if not 0 <= opts.min_effect < 1:
        raise ConfigError(f"min_effect must be in [0, 1), got {opts.min_effect!r}")
    family = [*names, END_TO_END]
    n_a, n_b = blocks_a[END_TO_END].shape[0], blocks_b[END_TO_END].shape[0]
    draws = Bootstrap(n_a, n_b, paired=paired, resamples=opts.resamples, seed=opts.seed)
    entries = {name: {"name": name} for name in family}
    for label, q in METRICS.items():
        boots = {n: draws.ratios(blocks_a[n], blocks_b[n], q) for n in family}
        holm = holm_intervals(boots, min_effect=opts.min_effect, alpha=opts.alpha)
        for n in family:
            entries[n] |= _metric_entry(label, q, blocks_a[n], blocks_b[n], holm[n], paired, opts)
    for n in family:
        entries[n]["verdict"] = entries[n][f"{opts.metric}_verdict"]
        entries[n] |= {"tail_a": _tail(blocks_a[n]), "tail_b": _tail(blocks_b[n])}
    return {"stages": [entries[n] for n in names], "end_to_end": entries[END_TO_END]}


def _metric_entry(label, q, a, b, holm, paired: bool, opts: VerdictOptions) -> dict[str, Any]:
    """One name's ``{label}_*`` keys of :func:`compare_blocks`: ratio, interval, drift, verdict."""
    ci = (holm["ci"][0] / opts.widen, holm["ci"][1] * opts.widen)
    # separate runs: their drift is in min_effect already; what a noisy one did between them is unknown
    drift = ratio_drift(a, b, q) if paired else math.nan if opts.noisy else 0.0
    return {
        f"{label}_ratio": _r(point_ratio(a, b, q)),
        f"{label}_ci": [_r(ci[0]), _r(ci[1])],
        f"{label}_ci_level": round(holm["level"], 5),
        f"{label}_a_ms": _ms(a, q),
        f"{label}_b_ms": _ms(b, q),
        f"{label}_drift": _r(drift) if paired else None,
        # separate runs are judged as on a noisy machine: an interval not clear of 1 and not
        # inside the no-effect band is too noisy to tell, not "no detectable difference"
        f"{label}_verdict": verdict(
            ci,
            rejected=holm["rejected"],
            noisy=opts.noisy or not paired,
            min_effect=opts.min_effect,
            drift=drift,
        ),
    }


def paired_comparison(
    samples: pd.DataFrame, names: Sequence[str], *, a: int = 0, b: int = 1, **kwargs
) -> dict[str, Any]:
    """Compare configuration ``b`` with ``a`` of an interleaved run, paired by round; ``samples``:
    per measured request ``config``, ``round``, ``ok`` and ns per name and ``end_to_end``."""
    missing = [c for c in ("config", "round", "ok", *names, END_TO_END) if c not in samples.columns]
    if missing:
        raise ConfigError(f"samples: missing columns {missing}")
    ok = samples[samples["ok"].astype(bool)]
    sides = [ok[ok["config"] == c] for c in (a, b)]
    for c, side in zip((a, b), sides):
        if side.empty:
            raise ConfigError(f"configuration {c} has no successful measured request to compare")
    rounds = sorted(set(sides[0]["round"]) & set(sides[1]["round"]))
    sides = [s[s["round"].isin(rounds)] for s in sides]
    blocks = [
        {n: round_blocks(s[n].to_numpy("float64"), s["round"]) for n in (*names, END_TO_END)}
        for s in sides
    ]
    return compare_blocks(blocks[0], blocks[1], names, paired=True, **kwargs)


def ratio_drift(blocks_a: np.ndarray, blocks_b: np.ndarray, q: float) -> float:
    """``|ratio(second half) / ratio(first half) - 1|`` of paired blocks (rows in round order); NaN under 2 rounds."""
    half = blocks_a.shape[0] // 2
    if half < 1:
        return math.nan
    first = point_ratio(blocks_a[:half], blocks_b[:half], q)
    second = point_ratio(blocks_a[half:], blocks_b[half:], q)
    return abs(second / first - 1.0) if first > 0 else math.nan


def run_drift(blocks: np.ndarray, q: float) -> float:
    """``|percentile_q(second half) / percentile_q(first half) - 1|`` of one run (blocks in request order)."""
    half = blocks.shape[0] // 2
    if half < 1:
        return math.nan
    return abs(point_ratio(blocks[:half], blocks[half:], q) - 1.0)


def resolution(
    blocks_a: np.ndarray, blocks_b: np.ndarray, opts: VerdictOptions = VerdictOptions()
) -> dict[str, Any]:
    """The smallest relative difference two *separate* runs can resolve (README): a lower bound,
    the machine can change between the runs."""
    q = METRICS[opts.metric]
    boots = Bootstrap(
        blocks_a.shape[0], blocks_b.shape[0], paired=False, resamples=opts.resamples, seed=opts.seed
    ).ratios(blocks_a, blocks_b, q)
    boots = boots[np.isfinite(boots)]
    point = point_ratio(blocks_a, blocks_b, q)
    half = math.nan
    if boots.size and math.isfinite(point):
        lo, hi = np.quantile(boots, [opts.alpha / 2, 1 - opts.alpha / 2])
        half = max(hi - point, point - lo)
    drifts = run_drift(blocks_a, q), run_drift(blocks_b, q)
    parts = [x for x in (half, *drifts) if math.isfinite(x)]
    return {
        "metric": opts.metric,
        "min_difference": _r(max(parts)) if parts else None,
        "ci_half_width": _r(half),
        "drift_a": _r(drifts[0]),
        "drift_b": _r(drifts[1]),
        "how": "max(half-width of the 95 % bootstrap interval of the end-to-end ratio, "
        "each run's first-half vs second-half change); a lower bound",
    }


def separate_comparison(
    matrix_a: pd.DataFrame,
    matrix_b: pd.DataFrame,
    names: Sequence[str],
    *,
    noisy: tuple = (None, None),
    shares: tuple = (None, None),
    block: int = BLOCK,
    options: VerdictOptions | None = None,
    **overrides,
) -> dict[str, Any]:
    """Compare two separate runs (module docstring) from each :func:`~.tail.stage_matrix`, or the
    same columns as ns arrays; ``shares``: ``other_cores / cores`` (:func:`taken_apart`)."""
    opts = replace(options or VerdictOptions(), **overrides)
    family = [*names, END_TO_END]
    blocks = []  # each run's consecutive_blocks per name
    for label, matrix in (("run A", matrix_a), ("run B", matrix_b)):
        missing = [n for n in family if n not in matrix]
        if missing:
            raise ConfigError(f"{label}: no column for {missing}")
        if len(matrix[END_TO_END]) == 0:
            raise ConfigError(f"{label} has no successful measured request to compare")
        blocks.append(
            {n: consecutive_blocks(np.asarray(matrix[n], dtype="float64"), block) for n in family}
        )
    ends = blocks[0][END_TO_END], blocks[1][END_TO_END]
    res = resolution(*ends, opts)
    apart = taken_apart(noisy, shares)
    effective = min(0.99, max(opts.min_effect, res["min_difference"] or 0.0))
    judged = replace(
        opts, min_effect=effective, noisy=any(flag is True for flag in noisy), widen=apart["widen"]
    )
    return {
        "kind": "separate runs",
        "noisy": list(noisy),
        "resolution": res,
        "min_effect": _r(effective),
        "taken_apart": apart,
        **compare_blocks(blocks[0], blocks[1], names, paired=False, options=judged),
    }


def taken_apart(noisy: tuple, shares: tuple) -> dict[str, Any]:
    """``widen = (1 + share_a) * (1 + share_b)``: a share (``other_cores / cores``, 0..1, None as 0)
    is the part of the machine other processes used, which could have taken that part of the run."""
    known = [min(max(float(x), 0.0), 1.0) if x is not None else None for x in shares]
    widen = math.prod(1.0 + (x or 0.0) for x in known)
    return {
        "interleaved": False,
        "shares": [_r(x) if x is not None else None for x in known],
        "widen": round(widen, 4),
        "noisy": any(flag is True for flag in noisy),
    }
