"""One lag summary and one load-meta key list, shared by live, load --url and served runs."""

import numpy as np
import pandas as pd

from workbench.batching.summary import (
    LOAD_META_KEYS,
    lag_percentiles,
    lag_summary,
    load_meta_figures,
    load_summary,
)


def test_the_load_meta_lag_keys_are_the_lag_percentiles():
    lags = np.array([0, 100_000, 200_000, 3_000_000], dtype=np.int64)
    lag = lag_percentiles(lags)
    assert lag["max_ms"] == 3.0
    assert lag_summary(lags, late_threshold_ms=0.15) == {
        "generator_lag_ms": lag["max_ms"],
        "generator_lag_p99_ms": lag["p99_ms"],
        "late_requests": 2,
        "late_threshold_ms": 0.15,
        "behind_schedule": True,  # lag p99 2.9 ms >= 1 ms
        "lag_p99_limit_ms": 1.0,
    }  # 0.2 ms and 3 ms are late, 0.1 ms is not
    assert lag_summary(np.array([], dtype=np.int64)) == {
        "generator_lag_ms": 0.0,
        "generator_lag_p99_ms": 0.0,
        "late_requests": 0,
        "late_threshold_ms": 1.0,
        "behind_schedule": False,
        "lag_p99_limit_ms": 1.0,
    }


def test_load_meta_figures_are_the_summary_keys_every_load_run_records():
    ms = 1_000_000
    requests = {
        "arrival_ns": [0, ms, 2 * ms],
        "batch_wait_ns": [0, 0, 0],
        "queue_wait_ns": [0, 0, 0],
        "service_ns": [ms, ms, ms],
        "dur_ns": [ms, ms, ms],
        "batch": [0, 1, 2],
        "batch_size": [1, 1, 1],
        "ok": [True, True, False],
    }  # the failed request still kept the executor busy
    summary = load_summary(pd.DataFrame(requests))
    figures = load_meta_figures(summary)
    assert tuple(figures) == LOAD_META_KEYS
    assert figures == {
        "throughput_rps": 1000.0,
        "mean_batch_size": 1.0,
        "utilization": 1.0,
        "batch_sizes": {"1": 3},
        "requests": 3,
        "failed": 1,
        "batches": 3,
    }
