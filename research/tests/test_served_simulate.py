"""The research simulator: contention costs, draws in a measured order, speed levels; none of them = the package's."""

import numpy as np
import pytest

from research.served.simulate import simulate_served
from workbench.batching.arrivals import Arrivals
from workbench.batching.policy import BatchPolicy
from workbench.batching.service_model import ServiceModel
from workbench.batching.simulator import SEED_OFFSET, simulate
from workbench.errors import ConfigError

MS = 1_000_000


def test_with_no_variant_it_is_the_package_simulator():
    model = ServiceModel.from_samples({1: [MS, 2 * MS], 4: [3 * MS, 5 * MS]})
    arrivals = Arrivals("poisson", rate_rps=900.0, count=3_000, seed=4)
    for policy in (BatchPolicy(4, 2.0), BatchPolicy(4, 1.0, 2)):
        ours, theirs = (
            simulate_served(model, arrivals, policy, seed=9),
            simulate(model, arrivals, policy, seed=9),
        )
        assert ours.requests.equals(theirs.requests) and ours.batches.equals(theirs.batches)


def test_contention_costs_are_added_per_arrival_and_per_response():
    # One service sample of 1 ms; 0.5 ms per request arriving during a batch, 0.25 ms per response of the
    # batch before when this one starts right after it.
    sim = simulate_served(
        ServiceModel.from_samples({1: [1_000_000]}),
        np.array([0, 200_000, 400_000]),
        BatchPolicy(1, 0.0),
        per_arrival_ns=500_000,
        per_response_ns=250_000,
    )
    # Batch 0: 1 ms + 2 arrivals (0.2, 0.4 ms) x 0.5 ms = 2 ms. Batches 1 and 2 start as the one before
    # ends: 1 ms + 1 response x 0.25 ms, no arrivals left.
    assert sim.batches["start_ns"].tolist() == [0, 2_000_000, 3_250_000]
    assert sim.batches["service_ns"].tolist() == [2_000_000, 1_250_000, 1_250_000]
    assert sim.requests["dur_ns"].tolist() == [2_000_000, 3_050_000, 4_100_000]
    assert sim.meta["per_arrival_ms"] == 0.5
    with pytest.raises(ConfigError, match="contention costs must be >= 0 ns"):
        simulate_served(
            ServiceModel.from_samples({1: [MS]}),
            np.array([0]),
            BatchPolicy(1, 0),
            per_arrival_ns=-1,
        )


def test_ranks_draw_the_quantiles_in_their_order_from_a_seeded_offset_wrapping_around():
    model = ServiceModel.from_samples({1: [1000, 2000, 3000]})
    arrivals = np.arange(7, dtype=np.int64) * MS  # far apart: no queueing, service = end to end
    sim = simulate_served(
        model, arrivals, BatchPolicy(1, 0), seed=3, ranks=np.array([0.0, 1.0, 0.5, 0.25])
    )
    offset = int(np.random.default_rng([3, SEED_OFFSET]).integers(4))
    expected = np.roll([1000, 3000, 2000, 1500], -offset).tolist()
    assert sim.batches["service_ns"].tolist() == (expected * 2)[:7]
    assert sim.requests["dur_ns"].tolist() == (expected * 2)[:7]
    assert sim.meta["service_draws"] == "ranks of 4 measured batches"
    assert (
        simulate_served(model, arrivals, BatchPolicy(1, 0)).meta["service_draws"] == "independent"
    )


@pytest.mark.parametrize(
    "ranks", [np.array([]), np.array([0.5, 1.5]), np.array([[0.5]]), np.array([np.nan])]
)
def test_bad_ranks_are_refused(ranks):
    with pytest.raises(
        ConfigError, match=r"ranks: expected a non-empty 1-d sequence of quantile ranks in \[0, 1\]"
    ):
        simulate_served(
            ServiceModel.from_samples({1: [1000]}),
            np.array([0, MS]),
            BatchPolicy(1, 0),
            ranks=ranks,
        )
