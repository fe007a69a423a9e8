"""The machine's slow phases: service speed as a level that holds for a while, fitted from served runs.

On the 2-core VM the served pipeline's time per batch moves between levels
that hold for half a second to a whole run (a new load-generator process often
starts at another level; the half-second levels' coefficient of variation is
0.11-0.20 per cell in ``benchmarks/results/batching_validation.md``).
The live tail is made in the slow phases: queues build while the level is
high. Independent draws from the pooled service times spread a phase over the
whole run, and the simulated p99 comes out low even with the measured
segments' own service times (the ``oracle`` of ``served_models.md``, 7-8 of 14
cells within 25 % of p99) where the same times in their measured order pass 10-11.

:func:`fit_phases` separates the two, over the batches of calibration runs:

* each batch's *base* time, as :func:`research.served.contention.base_ns`
  gives it (contention costs out, dispatch gap in);
* the *level* of each ``window_ns`` window of each run: the median, over the
  window's batches, of base / the pooled median base of the batch's size
  (a window with fewer than ``min_batches`` batches takes its run's level);
* the samples the simulator draws: each base divided by its window's level.

:meth:`Phases.trajectory` makes a speed trajectory for one simulated run by
laying whole runs' level sequences end to end, each run drawn at random (a
block bootstrap whose blocks are runs, so a slow phase stays together and a
run's level holds), for :func:`research.served.simulate.simulate_served`'s
``speed``.

Pure: pandas/numpy in, numbers out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.errors import ConfigError

from .contention import base_ns, batch_features

# Half a second: the phases in the served runs last that long or longer, and a window of the lightest
# calibration load (0.25 of capacity: 50-175 batches/s at batch 1) still holds 25 or more batches for its median.
WINDOW_NS = 500_000_000


@dataclass(frozen=True)
class Phases:
    """Per-run window levels (time order) and the level-free samples per batch size (int64 ns)."""

    window_ns: int
    levels: list[np.ndarray]
    samples: dict[int, np.ndarray]

    def trajectory(self, duration_ns: int, rng: np.random.Generator) -> tuple[int, np.ndarray]:
        """``(window_ns, factors)`` covering ``duration_ns``: runs' level sequences end to end, runs drawn at random."""
        need = int(duration_ns // self.window_ns) + 1
        parts, have = [], 0
        while have < need:
            run = self.levels[int(rng.integers(len(self.levels)))]
            parts.append(run)
            have += len(run)
        return self.window_ns, np.concatenate(parts)[:need]

    def spread(self) -> float:
        """Coefficient of variation of the window levels (0: one speed throughout)."""
        allv = np.concatenate(self.levels)
        return float(allv.std() / allv.mean())


def fit_phases(
    runs: Iterable,
    per_arrival_ns: float,
    per_response_ns: float,
    *,
    window_ns: int = WINDOW_NS,
    min_batches: int = 5,
) -> Phases:
    """Fit window levels and level-free samples over the batches of ``runs`` (load or served runs).

    ``per_arrival_ns`` and ``per_response_ns``: the contention costs to take
    out first (:func:`research.served.contention.fit_contention`; 0 for none).
    Sizes with fewer than ``min_batches`` batches in all runs together give
    no level and no samples; runs with no such batch are left out.
    """
    if window_ns <= 0:
        raise ConfigError(f"phases: window_ns must be positive, got {window_ns}")
    frames = []
    for k, run in enumerate(runs):
        f = batch_features(run.requests)
        if f.empty:
            continue
        base = base_ns(f, per_arrival_ns, per_response_ns)
        frames.append(
            f.assign(run=k, base=base, window=(f["start_ns"] - f["start_ns"].iloc[0]) // window_ns)
        )
    if not frames:
        raise ConfigError("phases: no successful batches in the runs given")
    b = pd.concat(frames, ignore_index=True)
    counts = b["size"].value_counts()
    b = b[b["size"].isin(counts[counts >= min_batches].index)]
    if b.empty:
        raise ConfigError(f"phases: no batch size has {min_batches} or more batches")
    ratio = b["base"] / b.groupby("size")["base"].transform("median")
    b = b.assign(ratio=ratio)
    run_level = b.groupby("run")["ratio"].median()
    by_window = b.groupby(["run", "window"])["ratio"].agg(["median", "size"])
    level = by_window["median"].where(
        by_window["size"] >= min_batches,
        run_level.reindex(by_window.index.get_level_values("run")).to_numpy(),
    )
    levels = []
    for run, lv in level.groupby(level="run"):
        windows = lv.index.get_level_values("window").to_numpy()
        full = np.full(
            int(windows.max()) + 1, float(run_level[run])
        )  # windows with no batch: the run's level
        full[windows] = lv.to_numpy()
        levels.append(full)
    per_batch = level.reindex(pd.MultiIndex.from_arrays([b["run"], b["window"]])).to_numpy()
    base = np.maximum(np.rint(b["base"].to_numpy(float) / per_batch), 1).astype(np.int64)
    sizes = b["size"].to_numpy()
    return Phases(int(window_ns), levels, {int(s): base[sizes == s] for s in np.unique(sizes)})
