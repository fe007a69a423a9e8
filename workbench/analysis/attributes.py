"""What a stage's time tracks: the effect of each ``describe=`` attribute, range by range.

A stage's ``describe=`` records one number per attribute per call (``attr.<name>`` columns). Per
stage (and end to end) and attribute, the successful measured requests are binned by value and
compared range by range (EFFECT in docs/json.md: the keys and the binning rule). **effect** (top
bin's p50 over the bottom's) says how large, **rho** (Spearman, Fisher-z interval with Bonett &
Wright's error) how monotone: rho 0.32 can hide a 33x effect only 3 % of requests reach.
**separated**: the two bins' p50 intervals are disjoint (else noise, never named). **explained**:
the stage's share of the mean end to end times ``1 - 1 / effect`` (effect taken >= 1)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .tail import END_TO_END, stage_matrix
from .stats import NS_PER_MS, Z_95, percentile_ci_ns, percentile_ns

ATTR_PREFIX = "attr."
MIN_REQUESTS = 30
SUPERLINEAR = 1.3  # a fitted exponent at least this is said: the stage grows faster than linearly
MAX_LEVELS = 8
# the top bin is the top 5 % of values: where a heavy minority lives
QUANTILE_CUTS = (25, 50, 75, 95)
MIN_BIN = 5


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rho (average ranks for ties); None when either side is constant."""
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def fisher_interval(rho: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """95 % interval of a Spearman rho (Fisher z with the Bonett-Wright standard error)."""
    if abs(rho) >= 1.0:
        return rho, rho
    se = math.sqrt((1.0 + rho * rho / 2.0) / (n - 3))
    centre = math.atanh(rho)
    return math.tanh(centre - z * se), math.tanh(centre + z * se)


def bin_labels(values: np.ndarray) -> np.ndarray:
    """Bin number (0 = smallest) of each value: one bin per value up to ``MAX_LEVELS`` values,
    else quantile bins cut at ``QUANTILE_CUTS``; bins under ``MIN_BIN`` merged."""
    levels = np.unique(values)
    if levels.size <= MAX_LEVELS:
        edges = levels[1:]
    else:
        ordered = np.sort(values)
        cuts = [
            ordered[min(values.size - 1, math.ceil(q / 100 * values.size))] for q in QUANTILE_CUTS
        ]
        edges = np.unique(np.asarray(cuts, dtype=float))
        edges = edges[edges > levels[0]]
    labels = np.searchsorted(edges, values, side="right")
    # relabel so every bin holds MIN_BIN values: a small one joins the next
    counts = np.bincount(labels)
    target, run, mapping = 0, 0, np.zeros(counts.size, dtype=np.int64)
    for b, c in enumerate(counts):
        mapping[b] = target
        run += int(c)
        if run >= MIN_BIN:
            target, run = target + 1, 0
    if run and target > 0:  # a short last group joins the bin below it
        mapping[mapping == target] = target - 1
    return np.unique(mapping[labels], return_inverse=True)[1]


def effect_entry(times_ns: np.ndarray, values: np.ndarray, share: float | None) -> dict[str, Any]:
    """One stage's times against one attribute (EFFECT in docs/json.md)."""
    n = int(times_ns.size)
    entry: dict[str, Any] = {"n": n, "rho": None, "rho_ci": None, "effect": None, "exponent": None}
    entry |= {"separated": False, "share": share, "explained": None, "note": None, "bins": []}
    if n == 0:
        return entry | {"note": "no request has both the stage and the attribute"}
    labels = bin_labels(values)
    entry["bins"] = [
        _bin(times_ns[labels == b], values[labels == b]) for b in range(int(labels.max()) + 1)
    ]
    if n < MIN_REQUESTS:
        return entry | {"note": f"{n} requests; an effect needs at least {MIN_REQUESTS}"}
    rho = spearman(times_ns, values)
    if rho is not None:
        lo, hi = fisher_interval(rho, n)
        entry |= {"rho": rho, "rho_ci": [lo, hi]}
    bottom, top = entry["bins"][0]["p50_ms"], entry["bins"][-1]["p50_ms"]
    if len(entry["bins"]) < 2:
        return entry | {"note": "the attribute takes one value"}
    if not bottom:
        return entry | {"note": "the bottom range's p50 is 0"}
    effect = top / bottom
    return entry | {
        "effect": effect,
        "exponent": growth_exponent(times_ns, values),
        "separated": separated(entry["bins"][0], entry["bins"][-1]),
        "explained": None if share is None else share * explained_fraction(effect),
    }


def growth_exponent(times_ns: np.ndarray, values: np.ndarray) -> float | None:
    """The least-squares slope of log(time) on log(value) (1.0 linear, 2.0 quadratic); None when
    the values do not span a factor of 2."""
    keep = (times_ns > 0) & (values > 0)
    x, y = np.log(values[keep].astype(float)), np.log(times_ns[keep].astype(float))
    if x.size < MIN_REQUESTS or not x.max() - x.min() >= np.log(2.0):
        return None
    return float(np.polyfit(x, y, 1)[0])


def growth_phrase(stage: str, attribute: str, exponent: float | None) -> str | None:
    """``normalize grows as words^2.0`` for an exponent of at least ``SUPERLINEAR``, else None."""
    if exponent is None or exponent < SUPERLINEAR:
        return None
    return f"{stage} grows as {attribute}^{exponent:.1f}"


def separated(low: dict[str, Any], high: dict[str, Any]) -> bool:
    """Whether two bins' p50 intervals are disjoint; a bin too small for a bounded interval uses
    min to max (it holds the median with probability 1 - 2 x 0.5^n)."""
    a_lo, a_hi = _p50_interval(low)
    b_lo, b_hi = _p50_interval(high)
    return a_hi < b_lo or b_hi < a_lo


def _p50_interval(b: dict[str, Any]) -> tuple[float, float]:
    if b["p50_ci_low_ms"] is None or b["p50_ci_high_ms"] is None:
        return b["min_ms"], b["max_ms"]
    return b["p50_ci_low_ms"], b["p50_ci_high_ms"]


def explained_fraction(effect: float) -> float:
    """``1 - 1 / effect`` with the effect taken >= 1 (1.0 when the effect is 0)."""
    return 1.0 if effect == 0 else 1.0 - 1.0 / max(effect, 1.0 / effect)


def _bin(times_ns: np.ndarray, values: np.ndarray) -> dict[str, Any]:
    lo, hi = percentile_ci_ns(times_ns, 50)
    return {
        "lo": float(values.min()),
        "hi": float(values.max()),
        "count": int(times_ns.size),
        "p50_ms": percentile_ns(times_ns, 50) / NS_PER_MS,
        "p99_ms": percentile_ns(times_ns, 99) / NS_PER_MS,
        "p50_ci_low_ms": None if lo is None else lo / NS_PER_MS,
        "p50_ci_high_ms": None if hi is None else hi / NS_PER_MS,
        "min_ms": float(times_ns.min()) / NS_PER_MS,
        "max_ms": float(times_ns.max()) / NS_PER_MS,
    }


def attribute_effects(
    requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str]
) -> dict[str, dict[str, dict[str, Any]]] | None:
    """``{stage: {attribute: effect_entry}}``, then ``end_to_end``; None without attributes."""
    names = [c[len(ATTR_PREFIX) :] for c in requests.columns if c.startswith(ATTR_PREFIX)]
    if not names:
        return None
    wide = stage_matrix(requests, stages, stage_order)
    attrs = requests.set_index("request").reindex(wide.index)
    e2e_mean = float(wide[END_TO_END].mean()) if len(wide) else 0.0
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stage in [*stage_order, END_TO_END]:
        share = float(wide[stage].fillna(0).mean()) / e2e_mean if e2e_mean else None
        for attr in names:
            values = pd.to_numeric(attrs[ATTR_PREFIX + attr], errors="coerce")
            both = pd.concat([wide[stage], values], axis=1).dropna()
            out.setdefault(stage, {})[attr] = effect_entry(
                both.iloc[:, 0].to_numpy(np.int64), both.iloc[:, 1].to_numpy(float), share
            )
    return out


def ranked_effects(effects: dict[str, dict[str, dict[str, Any]]] | None) -> list[dict[str, Any]]:
    """The separated effects of the stages, most time explained first."""
    rows = [
        {"stage": s, "attribute": a} | {k: e[k] for k in ("effect", "share", "explained")}
        for s, by_attr in (effects or {}).items()
        if s != END_TO_END
        for a, e in by_attr.items()
        if e["separated"] and e["explained"] is not None
    ]
    return sorted(rows, key=lambda r: (-r["explained"], -r["effect"], r["stage"], r["attribute"]))


def effect_sentence(effects: dict[str, dict[str, dict[str, Any]]] | None) -> str | None:
    """``"hydrate tracks keys: p50 9.7 ms at 16 against 322.6 ms at 640 (33x); hydrate is 62 % of
    the mean end to end"`` (+ :func:`growth_phrase`) of the top ranked effect; None without one."""
    ranked = ranked_effects(effects)
    if not ranked:
        return None
    best = ranked[0]
    entry = effects[best["stage"]][best["attribute"]]
    low, high = entry["bins"][0], entry["bins"][-1]
    grows = growth_phrase(best["stage"], best["attribute"], entry.get("exponent"))
    return (
        f"{best['stage']} tracks {best['attribute']}: p50 {low['p50_ms']:.3g} ms at {_range(low)} against "
        f"{high['p50_ms']:.3g} ms at {_range(high)} ({best['effect']:.3g}x); {best['stage']} is "
        f"{best['share']:.0%} of the mean end to end" + (f"; {grows}" if grows else "")
    )


def _range(b: dict[str, Any]) -> str:
    return f"{b['lo']:g}" if b["lo"] == b["hi"] else f"{b['lo']:g}-{b['hi']:g}"
