import dataclasses

import numpy as np
import pandas as pd
import pytest

from workbench.batching.arrivals import Arrivals
from tests.support.dispatch import dispatch_schedule
from workbench.batching.policy import BatchPolicy
from workbench.batching.service_model import ServiceModel
from workbench.batching.simulator import simulate
from workbench.batching.summary import load_summary
from workbench.errors import ConfigError
from workbench.batching.simulator import SWEEP_COLUMNS, sweep

MS = 1_000_000
N = 1_000_000


def exponential_model(mean_ns: float, n: int = N) -> ServiceModel:
    """Exact exponential quantiles on a grid of n points (mean within 1e-5 of mean_ns)."""
    k = np.arange(n)
    return ServiceModel.from_samples({1: -np.log1p(-(k + 0.5) / n) * mean_ns})


def mean_wait_s(sim) -> float:
    r = sim.requests
    return float((r["batch_wait_ns"] + r["queue_wait_ns"]).mean()) / 1e9


def test_mm1_mean_waiting_time():
    # max_batch_size 1, max_wait 0: a single-server FIFO queue. Wq = rho / (mu - lambda).
    mu, lam = 1000.0, 700.0
    sim = simulate(
        exponential_model(1e9 / mu),
        Arrivals("poisson", rate_rps=lam, count=N, seed=0),
        BatchPolicy(1, 0),
    )
    assert mean_wait_s(sim) == pytest.approx((lam / mu) / (mu - lam), rel=0.02)
    assert sim.stable and sim.capacity_rps == pytest.approx(mu, rel=1e-4)


def test_md1_mean_waiting_time():
    # deterministic service D: Wq = rho * D / (2 (1 - rho)).
    d, lam = 1e-3, 800.0
    model = ServiceModel.from_samples({1: [d * 1e9]})
    sim = simulate(model, Arrivals("poisson", rate_rps=lam, count=N, seed=0), BatchPolicy(1, 0))
    rho = lam * d
    assert mean_wait_s(sim) == pytest.approx(rho * d / (2 * (1 - rho)), rel=0.02)


@pytest.mark.parametrize(
    "policy",
    [BatchPolicy(8, 1.5), BatchPolicy(4, 0.0, 2), BatchPolicy(1, 0.0), BatchPolicy(16, 10.0, 3)],
)
def test_simulator_matches_the_reference_rule(policy):
    arrivals = Arrivals("bursty", rate_rps=2500, count=3000, seed=4).times_ns()
    model = ServiceModel.from_samples(
        {1: [1 * MS], 16: [4 * MS]}
    )  # linear in size: 1 ms + 0.2 ms per item
    sim = simulate(model, arrivals, policy)
    ref = pd.DataFrame(dispatch_schedule(arrivals, sim.batches["service_ns"].tolist(), policy))
    for col in ("size", "first", "due_ns", "close_ns", "start_ns", "end_ns"):
        assert sim.batches[col].tolist() == ref[col].tolist(), col
    assert sim.batches["service_ns"].tolist() == [
        MS + (s - 1) * 200_000 for s in sim.batches["size"]
    ]


def test_request_breakdown_sums_to_end_to_end():
    sim = simulate(
        ServiceModel.from_samples({1: [2 * MS, 3 * MS], 8: [5 * MS, 9 * MS]}),
        Arrivals("poisson", rate_rps=900, count=5000, seed=1),
        BatchPolicy(8, 2),
    )
    r = sim.requests
    assert (r["batch_wait_ns"] + r["queue_wait_ns"] + r["service_ns"] == r["dur_ns"]).all()
    assert (r[["batch_wait_ns", "queue_wait_ns", "service_ns"]] >= 0).all().all()
    # batch wait ends when the batch is due (at most max wait, 2 ms); back-pressure (a batch waiting for the
    # one before it to start, then for the executor) is queue wait: once counted as batch wait (110 ms p99)
    assert r["batch_wait_ns"].max() == 2 * MS
    assert r["queue_wait_ns"].max() > 2 * MS
    b = sim.batches.set_index("batch").loc[r["batch"]]
    assert (
        (r["arrival_ns"] + r["batch_wait_ns"]).to_numpy()
        == np.clip(b["due_ns"].to_numpy(), r["arrival_ns"].to_numpy(), b["close_ns"].to_numpy())
    ).all()
    assert r["batch_size"].max() <= 8


def test_seeded_and_repeatable():
    model = ServiceModel.from_samples(
        {1: np.arange(1, 101) * 10_000.0, 4: np.arange(1, 101) * 30_000.0}
    )
    run = lambda seed: (
        simulate(
            model,
            Arrivals("poisson", rate_rps=3000, count=2000, seed=seed),  # noqa: E731
            BatchPolicy(4, 1),
            seed=seed,
        ).requests
    )
    assert run(5).equals(run(5))
    assert not run(5)["dur_ns"].equals(run(6)["dur_ns"])


def test_unstable_is_reported_and_finite():
    model = ServiceModel.from_samples({1: [1 * MS], 4: [2 * MS]})  # capacity 4 / 2 ms = 2000 req/s
    sim = simulate(
        model, Arrivals("poisson", rate_rps=2500, count=20_000, seed=0), BatchPolicy(4, 1)
    )
    assert sim.capacity_rps == pytest.approx(2000) and not sim.stable
    s = load_summary(sim.requests)
    assert s["mean_batch_size"] > 3.9 and s["throughput_rps"] == pytest.approx(2000, rel=0.01)
    assert s["end_to_end"]["max_ms"] > 1000  # the backlog grows over the horizon


def test_summary_exact_small_case():
    # two requests at 0 and 1 ms, max 2, wait 5 ms, service 3 ms -> one batch closed at 1 ms.
    sim = simulate(ServiceModel.from_samples({2: [3 * MS]}), np.array([0, MS]), BatchPolicy(2, 5))
    s = load_summary(sim.requests)
    assert s["batch_wait"]["max_ms"] == 1.0 and s["batch_wait"]["mean_ms"] == 0.5
    assert s["service"]["p50_ms"] == 3.0 and s["queue_wait"]["max_ms"] == 0.0
    assert s["end_to_end"]["max_ms"] == 4.0 and s["mean_batch_size"] == 2.0
    assert s["throughput_rps"] == pytest.approx(2 / 0.004) and s["utilization"] == pytest.approx(
        0.75
    )
    assert s["batch_sizes"] == {"2": 1}


def test_sweep_table():
    model = ServiceModel.from_samples({1: [1 * MS], 8: [3 * MS]})
    df = sweep(model, [200, 1000], [1, 8], [0, 2], requests=2000)
    assert list(df.columns) == SWEEP_COLUMNS and len(df) == 8
    assert df.loc[(df.rate_rps == 1000) & (df.max_batch_size == 1), "stable"].tolist() == [
        False,
        False,
    ]
    big = df[(df.rate_rps == 1000) & (df.max_batch_size == 8)]
    assert big["stable"].all() and (big["p99_ms"] < 20).all()
    assert df["mean_batch_size"].between(1, 8).all()


def test_a_batch_takes_exactly_its_drawn_service_time():
    sim = simulate(
        ServiceModel.from_samples({1: [1_000_000]}),
        np.array([0, 200_000, 400_000]),
        BatchPolicy(1, 0.0),
    )
    assert sim.batches["service_ns"].tolist() == [1_000_000] * 3


def test_sequence_draws_replay_the_runs_order_from_a_seeded_start_and_need_one():
    """Service times 1, 2, 3 ms measured in that order: 7 requests 10 ms apart (never queued)
    are served 1 -> 2 -> 3 -> 1 ... from a start the seed picks; independent draws do not keep it.
    A model made from samples has no order to replay."""
    model = ServiceModel.from_samples({1: [1_000_000, 2_000_000, 3_000_000]})
    arrivals = np.arange(7, dtype=np.int64) * 10_000_000
    with pytest.raises(ConfigError, match="made from samples"):
        simulate(model, arrivals, BatchPolicy(1, 0.0), draws="sequence")
    with pytest.raises(ConfigError, match="draws must be one of independent, sequence"):
        simulate(model, arrivals, BatchPolicy(1, 0.0), draws="shuffled")
    ordered = dataclasses.replace(model, order=np.array([0.0, 0.5, 1.0]))
    starts = set()
    for seed in range(12):
        sim = simulate(ordered, arrivals, BatchPolicy(1, 0.0), seed=seed, draws="sequence")
        ms = (sim.batches["service_ns"] // 1_000_000).astype(int).tolist()
        assert all(b == a % 3 + 1 for a, b in zip(ms, ms[1:])), ms
        starts.add(ms[0])
        assert sim.meta["service_draws"] == "sequence"
    assert starts == {1, 2, 3}
    independent = simulate(ordered, arrivals, BatchPolicy(1, 0.0), seed=0).batches["service_ns"]
    assert len(set(independent.round(-3))) > 3  # interpolated between the three: not replayed


def test_a_model_with_states_draws_a_batch_that_waited_from_the_back_to_back_calls():
    """After an idle gap calls take 3 ms, back to back 1 ms: requests at 0, 1 and 10 ms are served
    3 (idle), 1 (it waited behind the first) and 3 ms (idle again)."""
    idle = ServiceModel.from_samples({1: [3_000_000] * 2})
    back = ServiceModel.from_samples({1: [1_000_000] * 2})
    both = dataclasses.replace(
        ServiceModel.from_samples({1: [1_000_000, 3_000_000]}), states=(idle, back)
    )
    sim = simulate(both, np.array([0, 1, 10], dtype=np.int64) * 1_000_000, BatchPolicy(1, 0.0))
    assert sim.batches["service_ns"].tolist() == [3_000_000, 1_000_000, 3_000_000]
    assert sim.requests["dur_ns"].tolist() == [3_000_000, 3_000_000, 3_000_000]
    assert set(sim.meta["service_model"]["states"]) == {"after_idle", "back_to_back"}
