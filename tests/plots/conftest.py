"""Fixtures for figure tests (helpers live in plots_helpers.py)."""

from __future__ import annotations

import pytest
from plots_helpers import ORDER, make_run, summary_of


@pytest.fixture
def toy_run():
    """100 measured requests (+2 slow warm-up): parse 1..100 us, model 10 ms flat, post 2 ms + i us."""
    durs = {
        "parse": [50_000_000, 40_000_000] + [1_000 * (i + 1) for i in range(100)],
        "model": [80_000_000, 20_000_000] + [10_000_000] * 100,
        "post": [3_000_000, 3_000_000] + [2_000_000 + 1_000 * i for i in range(100)],
    }
    requests, stages = make_run(durs, warmup=2)
    return requests, stages, list(ORDER)


@pytest.fixture
def toy_summary(toy_run):
    requests, stages, order = toy_run
    return summary_of(requests, stages, order)


@pytest.fixture
def trace_events(tmp_path):
    from plots_helpers import small_trace

    return small_trace(tmp_path)


@pytest.fixture
def cpu_events(tmp_path):
    from plots_helpers import cpu_only_trace

    return cpu_only_trace(tmp_path)
