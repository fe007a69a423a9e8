"""Slow phases: window levels and level-free samples fitted exactly, trajectories of whole runs, the simulator's speed."""

import numpy as np
import pandas as pd
import pytest

from research.served.phases import fit_phases
from research.served.simulate import simulate_served
from workbench.batching.policy import BatchPolicy
from workbench.batching.service_model import ServiceModel
from workbench.errors import ConfigError

from .served_runs import run_of_requests

MS = 1_000_000


def run_of(levels: list[float], per_window: int = 50, base_ns: int = MS, sizes=(1,)):
    """A load run whose batches start every 10 ms, idle executor (no dispatch gap, no overlap).

    Window w (0.5 s) holds ``per_window`` batches of service ``base_ns x size x levels[w]``;
    sizes cycle through ``sizes``.
    """
    rows, batch = [], 0
    for w, level in enumerate(levels):
        for k in range(per_window):
            start, size = (w * per_window + k) * 10 * MS, sizes[batch % len(sizes)]
            for _ in range(size):
                rows.append(
                    {
                        "batch": batch,
                        "ok": True,
                        "arrival_ns": start,
                        "batch_wait_ns": 0,
                        "queue_wait_ns": 0,
                        "service_ns": round(base_ns * size * level),
                    }
                )
            batch += 1
    return run_of_requests(pd.DataFrame(rows))


def test_levels_per_half_second_and_samples_without_them():
    phases = fit_phases([run_of([1.0, 1.0, 2.0]), run_of([1.0, 1.5])], 0.0, 0.0)
    assert [lv.tolist() for lv in phases.levels] == [
        [1.0, 1.0, 2.0],
        [1.0, 1.5],
    ]  # pooled median 1 ms
    assert (
        phases.samples[1].tolist() == [MS] * 250
    )  # every batch at base once its window's level is out
    assert phases.spread() == pytest.approx(np.std([1, 1, 2, 1, 1.5]) / 1.3)


def test_levels_are_size_free():
    """A window's level compares each batch with the median of its own size."""
    phases = fit_phases([run_of([1.0, 1.0, 1.25], sizes=(1, 4))], 0.0, 0.0)
    assert phases.levels[0].tolist() == [1.0, 1.0, 1.25]
    assert sorted(set(phases.samples[1].tolist())) == [MS] and sorted(
        set(phases.samples[4].tolist())
    ) == [4 * MS]


def test_a_window_with_few_batches_takes_its_runs_level():
    run = run_of([1.0, 3.0, 1.0])
    req = run.requests
    thin = req[
        (req["batch"] < 50) | (req["batch"] >= 97)
    ]  # the middle window keeps 3 of its 50 batches
    phases = fit_phases([run_of_requests(thin)], 0.0, 0.0, min_batches=5)
    assert phases.levels[0].tolist() == [1.0, 1.0, 1.0]


def test_trajectories_lay_whole_runs_end_to_end():
    phases = fit_phases([run_of([1.0, 1.0, 2.0])], 0.0, 0.0)
    window, factors = phases.trajectory(2_200 * MS, np.random.default_rng(0))
    assert window == 500 * MS and factors.tolist() == [1.0, 1.0, 2.0, 1.0, 1.0]
    two = fit_phases([run_of([1.0, 1.0, 1.0, 1.0]), run_of([3.0, 3.0])], 0.0, 0.0)
    for seed in range(20):
        _, f = two.trajectory(5_000 * MS, np.random.default_rng(seed))
        blocks = "".join("a" if x == two.levels[0][0] else "b" for x in f)
        assert len(f) == 11 and blocks.replace("aaaa", "").replace("bb", "") in (
            "",
            "a",
            "aa",
            "aaa",
            "b",
        )


def test_bad_input_is_refused():
    with pytest.raises(ConfigError, match="window_ns must be positive"):
        fit_phases([run_of([1.0])], 0.0, 0.0, window_ns=0)
    with pytest.raises(ConfigError, match="no batch size has 5"):
        fit_phases([run_of([1.0], per_window=3)], 0.0, 0.0)


def test_the_simulator_multiplies_each_batch_by_its_windows_speed():
    model = ServiceModel.from_samples({1: [MS]})
    arrivals = np.arange(0, 1_000 * MS, 100 * MS, dtype=np.int64) + 7  # 10 batches, from t = 7 ns
    sim = simulate_served(model, arrivals, BatchPolicy(1, 0), speed=(300 * MS, [1.0, 2.0, 0.5]))
    # starts 0-200 ms: x1; 300-500: x2; 600 and later: x0.5 (the last factor holds past the end)
    assert sim.batches["service_ns"].tolist() == [MS] * 3 + [2 * MS] * 3 + [MS // 2] * 4
    assert sim.meta["speed_windows"] == 3
    with pytest.raises(ConfigError, match="speed"):
        simulate_served(model, arrivals, BatchPolicy(1, 0), speed=(0, [1.0]))
    with pytest.raises(ConfigError, match="speed"):
        simulate_served(model, arrivals, BatchPolicy(1, 0), speed=(MS, [1.0, -1.0]))
