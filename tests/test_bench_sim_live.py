"""benchmarks/bench_sim_live.py: the sim/live check judged on the rounds pooled per load, and
scripts/validate_batching.py's pooled simulation it draws its samples from."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tests.conftest import load_script
from workbench.batching.policy import BatchPolicy
from workbench.batching.service_model import ServiceModel
from workbench.batching.simulator import simulate

REPO = Path(__file__).resolve().parents[1]
MS = 1_000_000


@pytest.fixture(scope="module")
def bench():
    return load_script(REPO / "benchmarks" / "bench_sim_live.py", "bench_sim_live_under_test")


def ms(values) -> np.ndarray:
    return (np.asarray(values, dtype=np.float64) * MS).astype(np.int64)


def run_at(bench, load: float, live: list[float], scale: dict[str, float], ratios: dict) -> tuple:
    """One round's row and samples at ``load``: each model's simulated latencies are the live ones
    times ``scale[model]``; the row carries the per-round ``ratios[model]`` (p50 and p99 alike)."""
    row = {"load": load}
    for m, r in ratios.items():
        for q in ("p50", "p99"):
            row |= {f"{m}_{q}_ratio": r, f"{m}_{q}_pass": bench.passes(r, q)}
    sim = {m: ms(np.asarray(live) * k) for m, k in scale.items()}
    return row, {"live": ms(live), "sim": sim}


@pytest.fixture
def two_loads(bench):
    """Two rounds at loads 0.2 and 0.4, the order alternating as the bench runs them. Closed
    simulates twice the live latencies, paced the same, live 1.1x at 0.2 and 1.3x at 0.4, self
    half."""
    runs = [
        run_at(bench, 0.2, [1, 2, 3, 4], {"closed": 2, "paced": 1, "live": 1.1, "self": 0.5},
               {"closed": 1.5, "paced": 0.9, "live": 1.0, "self": 0.5}),
        run_at(bench, 0.4, [1, 2, 3, 4], {"closed": 2, "paced": 1, "live": 1.3, "self": 0.5},
               {"closed": 2.0, "paced": 1.0, "live": 1.3, "self": 0.5}),
        run_at(bench, 0.4, [5, 6, 7, 8], {"closed": 2, "paced": 1, "live": 1.3, "self": 0.5},
               {"closed": 2.0, "paced": 1.2, "live": 1.3, "self": 0.5}),
        run_at(bench, 0.2, [5, 6, 7, 8], {"closed": 2, "paced": 1, "live": 1.1, "self": 0.5},
               {"closed": 2.5, "paced": 1.1, "live": 1.2, "self": 0.5}),
    ]  # fmt: skip
    return [r for r, _ in runs], [s for _, s in runs]


def test_pooled_takes_percentiles_of_the_rounds_concatenated(bench, two_loads):
    rows, samples = two_loads
    out = bench.pooled(rows, samples)
    assert [(r["load"], r["rounds"], r["live_requests"]) for r in out] == [(0.2, 2, 8), (0.4, 2, 8)]
    low = out[0]
    # 1..8 ms pooled: p50 4.5 ms, p99 at rank 0.99 * 7 = 6.93: 7.93 ms (linear interpolation);
    # neither round alone has these (2.5 and 6.5 ms on p50)
    assert low["live_p50_ms"] == pytest.approx(4.5)
    assert low["live_p99_ms"] == pytest.approx(7.93)
    assert low["closed_sim_p50_ms"] == pytest.approx(9.0)
    assert low["closed_p99_ratio"] == pytest.approx(2.0)
    assert low["paced_p50_ratio"] == pytest.approx(1.0)
    assert low["live_p99_ratio"] == pytest.approx(1.1)
    assert (low["closed_p50_pass"], low["paced_p99_pass"], low["live_p50_pass"]) == (
        False,
        True,
        True,
    )
    # the spread beside each pooled ratio: the per-round ratios' min and max
    assert (low["closed_p50_ratio_min"], low["closed_p50_ratio_max"]) == (1.5, 2.5)
    assert (low["paced_p99_ratio_min"], low["paced_p99_ratio_max"]) == (0.9, 1.1)
    high = out[1]
    assert (high["live_p50_pass"], high["live_p99_pass"]) == (False, False)  # 1.3x
    assert json.loads(json.dumps(out, allow_nan=False)) == out  # strict JSON as it is written


def test_verdict_counts_pooled_loads_and_names_the_model_that_holds(bench, two_loads):
    rows, samples = two_loads
    out = bench.pooled(rows, samples)
    assert bench.holding(out) == ["paced"]
    assert bench.verdict(rows, out) == [
        "closed: pooled, p50 within 15 % at 0/2 loads, p99 within 25 % at 0/2 "
        "(per round: p50 0/4, p99 0/4)",
        "paced: pooled, p50 within 15 % at 2/2 loads, p99 within 25 % at 2/2 "
        "(per round: p50 3/4, p99 4/4)",
        "live: pooled, p50 within 15 % at 1/2 loads, p99 within 25 % at 1/2 "
        "(per round: p50 1/4, p99 2/4)",
        "self: pooled, p50 within 15 % at 0/2 loads, p99 within 25 % at 0/2 "
        "(per round: p50 0/4, p99 0/4)",
        "Holds at all 2 loads (pooled p50 and p99): paced",
    ]
    missed = [r | {"paced_p99_pass": False} for r in out]
    assert bench.holding(missed) == []
    assert bench.verdict(rows, missed)[-1] == "No model holds at all 2 loads (pooled p50 and p99)."


def test_pooled_table_shows_each_ratio_with_its_spread(bench, two_loads):
    table = bench.pooled_table(bench.pooled(*two_loads))
    assert table[0] == (
        "| load | rounds | live requests | live p50 ms | live p99 ms | closed p50 ratio | "
        "paced p50 ratio | live p50 ratio | self p50 ratio | closed p99 ratio | paced p99 ratio | "
        "live p99 ratio | self p99 ratio |"
    )
    assert table[1] == "|" + "---|" * 13
    assert table[2] == (
        "| 0.2 | 2 | 8 | 4.5 | 7.93 | 2.00 (1.50..2.50) | 1.00 (0.90..1.10) | 1.10 (1.00..1.20) "
        "| 0.50 (0.50..0.50) | 2.00 (1.50..2.50) | 1.00 (0.90..1.10) | 1.10 (1.00..1.20) "
        "| 0.50 (0.50..0.50) |"
    )


def test_judged_keeps_the_measured_live_percentiles_beside_the_live_model(bench):
    """The model named ``live`` (simulate --service LIVE) writes ``live_sim_*``: its simulated p50
    once overwrote the measured ``live_p50_ms`` the tables show."""
    schedule = np.arange(4, dtype=np.int64) * 10 * MS  # 10 ms apart: nothing queues
    live = simulate(
        ServiceModel.from_samples({1: [4 * MS]}), schedule, BatchPolicy(1, 0.0)
    ).requests
    live.loc[3, ["ok", "dur_ns"]] = [False, 100 * MS]  # a failure: counted, not timed
    models = {m: ServiceModel.from_samples({1: [k * MS]}) for m, k in [("closed", 2), ("live", 5)]}
    row, samples = bench.judged(live, schedule, models, replications=2)
    assert row == {
        "requests": 4,
        "live_p50_ms": 4.0,
        "live_p99_ms": 4.0,
        "closed_sim_p50_ms": 2.0,
        "closed_p50_ratio": 0.5,
        "closed_p50_pass": False,
        "closed_sim_p99_ms": 2.0,
        "closed_p99_ratio": 0.5,
        "closed_p99_pass": False,
        "live_sim_p50_ms": 5.0,
        "live_p50_ratio": 1.25,
        "live_p50_pass": False,
        "live_sim_p99_ms": 5.0,
        "live_p99_ratio": 1.25,
        "live_p99_pass": True,
    }
    assert samples["live"].tolist() == [4 * MS] * 3
    assert {m: s.tolist() for m, s in samples["sim"].items()} == {
        "closed": [2 * MS] * 8,
        "live": [5 * MS] * 8,
    }


def test_simulate_requests_concatenates_the_draws_with_batches_apart():
    validate = load_script(REPO / "scripts" / "validate_batching.py", "validate_under_test")
    model = ServiceModel.from_samples({1: [2 * MS]})
    schedule = np.array([0, 10 * MS, 20 * MS], dtype=np.int64)
    policy = BatchPolicy(1, 0.0)
    requests = validate.simulate_requests(model, schedule, policy, 2)
    assert requests["dur_ns"].tolist() == [2 * MS] * 6
    assert requests["batch"].tolist() == [0, 1, 2, 10**9, 10**9 + 1, 10**9 + 2]
    summary = validate.simulate_pooled(model, schedule, policy, 2)
    assert (summary["requests"], summary["batches"]) == (6, 6)


def test_overheads_are_the_lag_and_the_queue_wait_of_requests_that_found_the_executor_idle(bench):
    """Three requests at batch size 1: the first and third arrive to an idle executor (their queue
    waits, 0.05 and 0.07 ms, are hand-overs), the second while the first is served (0.9 ms of
    queueing, not a hand-over); a failed request is left out."""
    requests = pd.DataFrame(
        {
            "ok": [True, True, True, False],
            "arrival_ns": ms([0.0, 0.5, 5.0, 6.0]),
            "batch_wait_ns": [0, 0, 0, 0],
            "queue_wait_ns": ms([0.05, 0.9, 0.07, 0.0]),
            "service_ns": ms([1.0, 1.0, 1.0, 1.0]),
            "lag_ns": ms([0.02, 0.04, 0.08, 9.0]),
        }
    )
    assert bench.overheads_ms(requests) == {
        "lag_p50_ms": pytest.approx(0.04),
        "handoff_p50_ms": pytest.approx(0.06),
    }


def test_timed_from_sent_takes_each_request_from_its_send_on_the_sends_schedule(bench):
    requests = pd.DataFrame(
        {"dur_ns": [5, 9, 4], "lag_ns": [1, 3, 0], "arrival_ns": [11, 23, 20], "ok": [True] * 3}
    )
    due = np.array([10, 20, 20])
    same, schedule = bench.timed_from(requests, due, "due")
    assert same is requests and schedule is due
    sent, schedule = bench.timed_from(requests, due, "sent")
    assert sent["dur_ns"].tolist() == [4, 6, 4] and schedule.tolist() == [11, 20, 23]
    assert requests["dur_ns"].tolist() == [5, 9, 4]  # the run's own table is left as it was


def test_full_collections_count_the_generation_2_pauses_of_a_live_runs_gc_record(bench):
    sampled = {"gc": {"generation": [0, 2, 1, 2, 0], "dur_ns": [1, 90, 2, 95, 1]}}
    assert bench.full_collections(sampled) == 2
    assert bench.full_collections(None) == 0 and bench.full_collections({"gc": {}}) == 0


def test_the_live_model_brackets_the_checked_run_with_two_half_runs_on_other_seeds(
    bench, monkeypatch
):
    """``--calibration bracket``: half the duration before the checked run, the checked run, half
    after, each on its own seed; the live model from the two halves only. ``before``: one run of
    the whole duration before it."""
    calls, made = [], []

    class Run:
        def __init__(self, seed):
            self.seed = seed
            self.meta = SimpleNamespace(
                load=SimpleNamespace(generator_lag_p99_ms=0.1), sampled=None
            )
            self.requests = None

    def live_load(example, config, rate, duration, seed):
        calls.append((rate, duration, seed))
        return Run(seed), SimpleNamespace(rate_rps=rate, times_ns=lambda: None)

    monkeypatch.setattr(bench, "live_load", live_load)
    monkeypatch.setattr(bench, "service_model_from_runs", lambda runs: made.append(runs) or "m")
    monkeypatch.setattr(bench, "overheads_ms", lambda requests: {})
    monkeypatch.setattr(bench, "state_p50_ms", lambda model: {})
    monkeypatch.setattr(bench, "timed_from", lambda requests, schedule, start: (None, None))
    monkeypatch.setattr(bench, "judged", lambda *a: ({}, {}))
    args = SimpleNamespace(
        duration=6.0, calibration="bracket", timed_from="due", replications=1, draws="sequence"
    )
    bench.one_rate("tabular", None, {}, 1000.0, 0.4, args, 3)
    assert calls == [(400.0, 3.0, 1003), (400.0, 6.0, 3), (400.0, 3.0, 2003)]
    assert [r.seed for r in made[0]] == [1003, 2003] and [r.seed for r in made[1]] == [3]
    calls.clear(), made.clear()
    bench.one_rate(
        "tabular",
        None,
        {},
        1000.0,
        0.4,
        SimpleNamespace(**{**vars(args), "calibration": "before"}),
        3,
    )
    assert calls == [(400.0, 6.0, 1003), (400.0, 6.0, 3)] and [r.seed for r in made[0]] == [1003]


def test_state_p50s_are_the_medians_of_the_idle_and_the_back_to_back_calls(bench):
    idle = ServiceModel.from_samples({1: [2 * MS, 3 * MS, 4 * MS]})
    back = ServiceModel.from_samples({1: [MS, 2 * MS]})
    both = dataclasses.replace(idle, states=(idle, back))
    assert bench.state_p50_ms(both) == {"idle_p50_ms": 3.0, "busy_p50_ms": 1.5}
    assert bench.state_p50_ms(idle) == {"idle_p50_ms": None, "busy_p50_ms": None}
    assert bench.states_cell({"idle_p50_ms": None}) == "(pooled)"
