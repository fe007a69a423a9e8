"""BatchingExplorer with a measured sweep: the measured curve beside the simulated one, the sweep's SLA."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.batching import ServiceModel
from workbench.errors import ConfigError
from workbench.widgets import BatchingExplorer


def sweep_record(kind="load"):
    points = [
        {
            "point": k,
            "run": f"point-{k:02d}",
            "rate_rps": r,
            "concurrency": 1,
            "offered_rps": r,
            "achieved_rps": r - 1,
            "p50_ms": 3.0 + k,
            "p99_ms": 6.0 + 2 * k,
            "stable": k < 2,
        }
        for k, r in enumerate((100.0, 200.0, 400.0))
    ]
    return {"kind": kind, "plan": {"sla_ms": 12.0}, "points": points, "knee": None}


def test_the_measured_sweep_is_drawn_on_the_curves_with_its_sla():
    spread = np.arange(50) * 1e4
    model = ServiceModel.from_samples({1: 2e6 + spread, 8: 6e6 + spread}, pipeline="toy")
    ex = BatchingExplorer(
        model=model, sweep=sweep_record(), debounce_s=0, requests=1_000, rate_rps=300.0
    ).wait()
    data = {t.name: t for t in ex.panes["curves"].figure.data}
    assert list(data["measured p99"].x) == [99.0, 199.0, 399.0] and list(
        data["measured p99"].y
    ) == [6.0, 8.0, 10.0]
    assert list(data["measured p50"].y) == [3.0, 4.0, 5.0]
    assert list(data["measured p99"].marker.symbol) == ["diamond", "diamond", "x-open"]
    assert "SLA 12 ms" in data and ex.sla_ms == 12.0


def test_a_served_sweep_alone_cannot_give_service_times():
    with pytest.raises(ConfigError, match="served sweep's points hold no batch service times"):
        BatchingExplorer(sweep=sweep_record("served"), start=False)
