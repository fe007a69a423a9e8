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
    return ServiceModel.from_samples(
        {1: 2e6 + spread, 4: 4e6 + spread, 8: 6e6 + spread}, pipeline="toy"
    )


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
    assert ex.message.startswith(
        "unstable queue: 1,500 req/s is at or above the capacity of 1,281 req/s"
    )
    ex.set(rate_rps=300.0).wait()
    assert ex.message == ""


def test_needs_runs_or_a_model():
    from workbench.errors import WorkbenchError

    with pytest.raises(WorkbenchError, match="service_runs"):
        BatchingExplorer()


def service_runs(tmp_path, noise_by_size: dict) -> list:
    """Synthetic profile runs of one pipeline at several batch sizes, with the given noise records."""
    from widget_fakes import synthetic_run

    from workbench.config import PipelineConfig

    folders = []
    for bs, noise in noise_by_size.items():
        run = synthetic_run("text", PipelineConfig(batch_size=bs), 20, 3)
        if noise is not None:
            run.meta = run.meta.replace(noise=noise)
        folders.append(run.save(tmp_path / f"text-bs{bs}"))
    return folders


def test_noisy_service_runs_are_named_with_their_reasons(tmp_path):
    noisy = {"noisy": True, "reasons": ["steal time was 9.0 %"], "fix": None}
    quiet = {"noisy": False, "reasons": [], "fix": None}
    ex = BatchingExplorer(
        service_runs(tmp_path, {1: quiet, 4: noisy}), debounce_s=0, requests=500, start=False
    )
    assert ex.trust_line.level == "warning"
    assert ex.trust_line.text == (
        "service times from noisy runs (text-bs4: steal time was 9.0 %): the simulated "
        "latencies carry that noise; profile them again on a quiet machine or with --threads 1"
    )


def test_service_runs_without_noise_readings_say_so(tmp_path):
    ex = BatchingExplorer(
        service_runs(tmp_path, {1: None, 4: None}), debounce_s=0, requests=500, start=False
    )
    assert (ex.trust_line.level, ex.trust_line.text) == (
        "info",
        "service times from 2 runs; noise not recorded for 2 of them (made before noise was measured)",
    )


def test_simulation_lives_in_the_batching_package_not_the_widget():
    import inspect

    import workbench.widgets.batching as widget

    source = inspect.getsource(widget)
    assert "simulate(" not in source and "sweep(" not in source and "batching_point(" in source
