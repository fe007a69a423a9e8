"""The service model's quantile rule written out (``workbench.batching.service_model``'s docstring):
the simulator inlines it in ``batch_loop``; tests check the rule's numbers through this."""

from __future__ import annotations

import numpy as np


def quantile_ns(model, size: int, u) -> np.ndarray:
    """Service time (float ns) of a batch of ``size`` at quantiles ``u`` in [0, 1]."""
    lo, hi, w = model.bracket(size)
    u = np.asarray(u, dtype=np.float64)
    q_lo = np.quantile(lo, u, method="linear")
    return q_lo if w == 0.0 else (1 - w) * q_lo + w * np.quantile(hi, u, method="linear")
