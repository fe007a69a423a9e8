"""The capacity sweep figure, through ``fig.to_dict()``."""

import pytest
from plots_helpers import decode

from workbench.batching.capacity import points_table
from workbench.plots.batching import sweep_figure, sweep_record_figure


def record(predicted=True):
    points = []
    for k, (rate, p50, p99, stable) in enumerate(
        [(50, 4.0, 8.0, True), (100, 5.0, 12.0, True), (200, 9.0, 40.0, False)]
    ):
        p = {
            "point": k,
            "run": f"point-{k:02d}",
            "rate_rps": rate,
            "offered_rps": rate * 0.98,
            "achieved_rps": rate * 0.97,
            "p50_ms": p50,
            "p99_ms": p99,
            "stable": stable,
        }
        if predicted:
            p["predicted"] = {
                "p50_ms": p50 / 2,
                "p99_ms": p99 / 4,
                "p50_ratio": 2.0,
                "p99_ratio": 4.0,
            }
        points.append(p)
    return {
        "plan": {"sla_ms": 20.0},
        "points": points,
        "knee": {"point": 1, "offered_rps": 98.0, "achieved_rps": 97.0, "p99_ms": 12.0},
    }


def test_measured_and_simulated_curves_with_sla_and_knee():
    fig = sweep_record_figure(record()).to_dict()
    assert [t["name"] for t in fig["data"]] == [
        "p99",
        "p50",
        "sim p99",
        "sim p50",
        "SLA 20 ms",
        "knee",
    ]
    p99 = fig["data"][0]
    assert decode(p99["x"]) == pytest.approx([48.5, 97.0, 194.0])
    assert decode(p99["y"]) == [8.0, 12.0, 40.0]
    assert list(p99["marker"]["symbol"]) == ["circle", "circle", "x-open"]
    assert decode(fig["data"][2]["y"]) == [2.0, 3.0, 10.0]
    assert decode(fig["data"][4]["y"]) == [20.0, 20.0] and decode(
        fig["data"][4]["x"]
    ) == pytest.approx([48.5, 194.0])
    knee = fig["data"][5]
    assert (
        decode(knee["x"]) == [97.0]
        and decode(knee["y"]) == [12.0]
        and knee["text"] == ["knee 98 req/s"]
    )


def test_without_prediction_or_knee():
    rec = record(predicted=False) | {"knee": None}
    fig = sweep_figure(points_table(rec), sla_ms=None).to_dict()
    assert [t["name"] for t in fig["data"]] == ["p99", "p50"]


def test_an_empty_sweep_says_so():
    fig = sweep_figure(points_table({"points": []})).to_dict()
    assert fig["data"] == [] and "no point measured" in fig["layout"]["annotations"][0]["text"]


def test_points_over_the_simulators_capacity_are_a_gap_and_the_capacity_a_line():
    import math

    rec = record()
    for p, stable in zip(rec["points"], (True, True, False)):
        p["predicted"] |= {"stable": stable, "capacity_rps": 150.0}
    fig = sweep_record_figure(rec).to_dict()
    names = [t["name"] for t in fig["data"]]
    assert names == [
        "p99",
        "p50",
        "sim p99",
        "sim p50",
        "sim capacity 150 req/s",
        "SLA 20 ms",
        "knee",
    ]
    sim = decode(fig["data"][2]["y"])
    assert sim[:2] == [2.0, 3.0] and math.isnan(sim[2])  # 200 req/s is over the simulated capacity
    assert decode(fig["data"][4]["x"]) == [150.0, 150.0] and decode(fig["data"][4]["y"]) == [
        4.0,
        40.0,
    ]
    assert (
        fig["layout"]["yaxis"]["type"] == "log" and fig["layout"]["yaxis"]["dtick"] == 1
    )  # decades only
