"""What a stage's time tracks: Spearman correlation of stage time with per-request attributes.

A stage may declare ``describe=`` (payload bytes, sequence length, image
pixels, cache hit...): one number per attribute per pipeline call, recorded in
the requests table as ``attr.<name>`` columns. For each stage and attribute
this reports Spearman's rho over the successful measured requests and a 95 %
interval from Fisher's z transform with the Bonett & Wright (2000) standard
error for Spearman, ``sqrt((1 + rho^2 / 2) / (n - 3))``. Fewer than
:data:`MIN_REQUESTS` (30) requests, or a constant attribute or stage time, give
no figure (rho None) and say why.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .matrix import END_TO_END, stage_matrix
from .stats import Z_95

ATTR_PREFIX = "attr."
MIN_REQUESTS = 30


def attribute_columns(requests: pd.DataFrame) -> list[str]:
    """Attribute names recorded in a requests table (without the ``attr.`` prefix)."""
    return [c[len(ATTR_PREFIX):] for c in requests.columns if c.startswith(ATTR_PREFIX)]


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


def attribute_correlations(requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str]) -> list[dict[str, Any]]:
    """One row per (stage or end_to_end, attribute): ``stage``, ``attribute``, ``n``, ``rho``, ``ci``, ``note``.

    Sorted by |rho|, strongest first (rows without a rho last).
    """
    names = attribute_columns(requests)
    if not names:
        return []
    wide = stage_matrix(requests, stages, stage_order)
    attrs = requests.set_index("request").reindex(wide.index)
    out = []
    for attr in names:
        values = pd.to_numeric(attrs[ATTR_PREFIX + attr], errors="coerce")
        for stage in [*stage_order, END_TO_END]:
            both = pd.concat([wide[stage], values], axis=1).dropna()
            out.append(_row(stage, attr, both.iloc[:, 0].to_numpy(float), both.iloc[:, 1].to_numpy(float)))
    return sorted(out, key=lambda r: -abs(r["rho"]) if r["rho"] is not None else 1.0)


def _row(stage: str, attr: str, times: np.ndarray, values: np.ndarray) -> dict[str, Any]:
    n = int(times.size)
    row = {"stage": stage, "attribute": attr, "n": n, "rho": None, "ci": None, "note": None}
    if n < MIN_REQUESTS:
        return row | {"note": f"{n} requests; a correlation needs at least {MIN_REQUESTS}"}
    rho = spearman(times, values)
    if rho is None:
        return row | {"note": f"{attr} or {stage} is constant"}
    lo, hi = fisher_interval(rho, n)
    return row | {"rho": rho, "ci": [lo, hi]}


def strongest_sentence(rows: list[dict[str, Any]]) -> str | None:
    """``"forward tracks seq_len, rho 0.91 [0.88, 0.93]"`` for the strongest stage correlation."""
    best = next((r for r in rows if r["rho"] is not None and r["stage"] != END_TO_END), None)
    if best is None:
        return None
    lo, hi = best["ci"]
    return f"{best['stage']} tracks {best['attribute']}, rho {best['rho']:.2f} [{lo:.2f}, {hi:.2f}]"
