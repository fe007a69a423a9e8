"""The served contention fit: costs per arrival and per response recovered from batches, exactly."""

import numpy as np
import pandas as pd
import pytest

from research.served.contention import batch_features, fit_contention, service_ranks
from workbench.errors import ConfigError

from .served_runs import runs_of

BASE_NS = {1: 1_000_000, 2: 1_500_000, 3: 2_000_000}
PER_ARRIVAL_NS, PER_RESPONSE_NS = 300_000, 200_000


def served_requests(batches: int = 60) -> pd.DataFrame:
    """A served run's requests table made with known costs.

    Batch i has size 1 + i % 3. When i is odd it starts 100 us after the batch before ended (its
    responses overlap); when even, 5 ms after, with ``(i // 2) % 4`` extra requests arriving 10 us
    apart just after it starts (batch -1: never dispatched, they only count as arrivals; the 5 ms gap
    keeps them out of the batch before's fixed window). Its own requests arrived before the first
    batch, so they fall in no batch's window.
    """
    rows, start, prev_size = [], 0, 0
    for i in range(batches):
        size, back_to_back = 1 + i % 3, i % 2 == 1
        extra = 0 if back_to_back else (i // 2) % 4
        service = (
            BASE_NS[size]
            + PER_ARRIVAL_NS * extra
            + (PER_RESPONSE_NS * prev_size if back_to_back else 0)
        )
        arrival = -1_000_000_000 - i
        for _ in range(size):
            rows.append(
                {
                    "batch": i,
                    "ok": True,
                    "arrival_ns": arrival,
                    "batch_wait_ns": start - arrival,
                    "queue_wait_ns": 0,
                    "service_ns": service,
                }
            )
        for k in range(1, extra + 1):
            rows.append(
                {
                    "batch": -1,
                    "ok": False,
                    "arrival_ns": start + 10_000 * k,
                    "batch_wait_ns": 0,
                    "queue_wait_ns": 0,
                    "service_ns": 0,
                }
            )
        prev_size = size
        start += service + (100_000 if (i + 1) % 2 == 1 else 5_000_000)
    return pd.DataFrame(rows)


def test_batch_features_count_arrivals_and_overlapping_responses():
    b = batch_features(served_requests(6))
    assert b["size"].tolist() == [1, 2, 3, 1, 2, 3]
    assert b["arrivals"].tolist() == [0, 0, 1, 0, 2, 0]
    assert b["arrivals_fixed"].tolist() == b["arrivals"].tolist()
    assert b["responses"].tolist() == [0, 1, 0, 3, 0, 2]


def test_the_dispatch_gap_is_time_a_closed_batch_waited_with_the_executor_free():
    """Batch 3 closed 300 us before its start, while batch 2 ran until 100 us before it: 100 us of gap.
    Batch 4 closed 40 us before its start with the executor idle (its wake-up): 40 us. The fit adds the
    gap to the batch's time, the simulator taking a closed batch at once."""
    req = served_requests(6)
    for batch, early_ns in ((3, 300_000), (4, 40_000)):
        rows = req["batch"] == batch
        req.loc[rows, "batch_wait_ns"] -= early_ns
        req.loc[rows, "queue_wait_ns"] += early_ns
    b = batch_features(req)
    assert b["dispatch_gap_ns"].tolist() == [0, 0, 0, 100_000, 40_000, 0]
    assert b["start_ns"].tolist() == batch_features(served_requests(6))["start_ns"].tolist()
    fit = fit_contention(runs_of(req), min_batches=2)
    assert sorted(fit.samples[1].tolist()) == [BASE_NS[1], BASE_NS[1] + 100_000]
    assert sorted(fit.samples[2].tolist()) == [BASE_NS[2], BASE_NS[2] + 40_000]


def test_fit_recovers_the_costs_and_the_base_service_times():
    fit = fit_contention(runs_of(served_requests()))
    assert fit.per_arrival_ns == pytest.approx(PER_ARRIVAL_NS, rel=1e-9)
    assert fit.per_response_ns == pytest.approx(PER_RESPONSE_NS, rel=1e-9)
    assert fit.batches == 60
    for size, base in BASE_NS.items():
        assert np.unique(fit.samples[size]).tolist() == [base]


def test_no_effect_is_a_zero_cost_and_no_batches_is_an_error():
    req = served_requests()
    req = req[req["batch"] >= 0].copy()
    req["service_ns"] = req["batch"].map(lambda i: BASE_NS[1 + i % 3])
    fit = fit_contention(runs_of(req))
    assert fit.per_arrival_ns == pytest.approx(
        0.0, abs=1e-3
    ) and fit.per_response_ns == pytest.approx(0.0, abs=1e-3)
    with pytest.raises(ConfigError, match="no successful batches"):
        fit_contention(runs_of(req.iloc[:0]))


def test_service_ranks_are_quantile_ranks_within_each_size_in_batch_order():
    f = pd.DataFrame({"size": [1, 1, 2, 1, 2, 3, 1], "service_ns": [5, 3, 7, 4, 9, 8, 4]})
    # size 1: 5, 3, 4, 4 -> ranks 4, 1, 2.5, 2.5 of 4; size 2: 7, 9; size 3 seen once: 0.5
    assert service_ranks(f).tolist() == [1.0, 0.0, 0.0, 0.5, 1.0, 0.5, 0.5]
    with pytest.raises(ConfigError, match="service ranks: no batches"):
        service_ranks(f.iloc[:0])
