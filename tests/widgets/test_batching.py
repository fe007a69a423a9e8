"""BatchingExplorer through its widget state: sliders -> simulated figures, cache, unstable warning."""
from __future__ import annotations

import numpy as np
import pytest

from workbench.batching import ServiceModel
from workbench.widgets import BatchingExplorer


@pytest.fixture
def model() -> ServiceModel:
    """2 ms at batch 1, 4 ms at batch 4, 6 ms at batch 8 (+ a 0..0.49 ms spread): capacity 1281 req/s at 8."""
    spread = np.arange(50) * 1e4
    return ServiceModel.from_samples({1: 2e6 + spread, 4: 4e6 + spread, 8: 6e6 + spread}, pipeline="toy")


def explorer(model, **kw) -> BatchingExplorer:
    return BatchingExplorer(model=model, debounce_s=0, requests=2_000, **kw).wait()


def test_first_view_draws_the_three_figures(model):
    ex = explorer(model, rate_rps=300.0, max_batch_size=8, max_wait_ms=5.0)
    assert all(p.updates == 1 for p in ex.panes.values())
    assert ex.status.value.startswith("capacity 1,281 req/s at max batch 8")
    names = [t.name for t in ex.panes["breakdown"].figure.data]
    assert names == ["batch wait", "queue wait", "service", "end to end"]
    wait_x = [x for t in ex.panes["wait"].figure.data for x in t.x]
    assert wait_x == [0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
    assert ex.message == ""


def test_moving_the_wait_slider_resimulates_and_the_cache_serves_the_way_back(model):
    ex = explorer(model, rate_rps=300.0, max_batch_size=8, max_wait_ms=5.0)
    first = ex.panes["breakdown"].figure.to_dict()
    runs = ex.simulations
    ex.set(max_wait_ms=20.0).wait()
    assert ex.simulations > runs
    assert ex.panes["breakdown"].figure.to_dict() != first
    runs = ex.simulations
    ex.set(max_wait_ms=5.0).wait()
    assert ex.simulations == runs  # drawn from the cache
    assert ex.panes["breakdown"].figure.to_dict() == first


def test_rate_above_capacity_warns_of_an_unstable_queue(model):
    ex = explorer(model, rate_rps=300.0, max_batch_size=8)
    ex.set(rate_rps=1500.0).wait()
    assert ex.message_line.level == "warning"
    assert ex.message.startswith("unstable queue: 1,500 req/s is at or above the capacity of 1,281 req/s")
    ex.set(rate_rps=300.0).wait()
    assert ex.message == ""


def test_needs_runs_or_a_model():
    from workbench.errors import WorkbenchError

    with pytest.raises(WorkbenchError, match="service_runs"):
        BatchingExplorer()
