import numpy as np
import pandas as pd
import pytest
from plots_helpers import decode

from workbench.batching import ServiceModel, load_summary, sweep
from workbench.batching.simulator import SWEEP_COLUMNS
from workbench.errors import ConfigError
from workbench.plots import batching_curves_figure, queueing_breakdown_figure, wait_time_figure


def toy_sweep() -> pd.DataFrame:
    """2 batch sizes x 2 waits x 2 rates; every number derived from the row so tests can check it."""
    rows = []
    for rate in (100.0, 400.0):
        for size in (1, 8):
            for wait in (0.0, 2.0):
                p50 = 1 + size / 10 + wait + rate / 1000
                rows.append(
                    {c: 0 for c in SWEEP_COLUMNS}
                    | {
                        "rate_rps": rate,
                        "max_batch_size": size,
                        "max_wait_ms": wait,
                        "stable": not (size == 1 and rate == 400),
                        "p50_ms": p50,
                        "p95_ms": 2 * p50,
                        "p99_ms": 3 * p50,
                        "mean_ms": p50,
                        "throughput_rps": rate * 0.99,
                        "batch_wait_p50_ms": wait / 2,
                        "queue_wait_p50_ms": 0.25,
                        "service_p50_ms": p50 - wait / 2 - 0.25,
                        "batch_wait_p99_ms": wait,
                        "queue_wait_p99_ms": 1.0,
                        "service_p99_ms": 2.0,
                    }
                )
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def test_latency_vs_throughput_curves():
    fig = batching_curves_figure(toy_sweep(), sla_ms=5).to_dict()
    names = [t["name"] for t in fig["data"]][:-1]
    assert names == [
        "bs=1 wait=0 ms p99",
        "bs=1 wait=0 ms p50",
        "bs=1 wait=2 ms p99",
        "bs=1 wait=2 ms p50",
        "bs=8 wait=0 ms p99",
        "bs=8 wait=0 ms p50",
        "bs=8 wait=2 ms p99",
        "bs=8 wait=2 ms p50",
    ]
    p99 = fig["data"][0]
    assert decode(p99["x"]) == [99.0, 396.0]
    assert decode(p99["y"]) == pytest.approx([3 * 1.2, 3 * 1.5])
    assert list(p99["marker"]["symbol"]) == ["circle", "x-open"]  # bs=1 at 400 req/s is unstable
    assert fig["layout"]["yaxis"]["type"] == "log"
    assert fig["data"][-1]["name"] == "SLA 5 ms" and decode(fig["data"][-1]["y"]) == [5.0, 5.0]
    assert decode(fig["data"][-1]["x"]) == [99.0, 396.0]


def test_p99_vs_wait_time_per_batch_size_at_one_rate():
    fig = wait_time_figure(toy_sweep(), rate_rps=100).to_dict()
    assert [t["name"] for t in fig["data"]] == ["bs=1", "bs=8"]
    assert decode(fig["data"][1]["x"]) == [0.0, 2.0]
    assert decode(fig["data"][1]["y"]) == pytest.approx([3 * 1.9, 3 * 3.9])
    assert fig["layout"]["title"]["text"] == "p99 latency vs max wait at 100 req/s"
    several = wait_time_figure(toy_sweep()).to_dict()
    assert [t["name"] for t in several["data"]][:2] == ["bs=1 @ 100 req/s", "bs=8 @ 100 req/s"]
    assert wait_time_figure(toy_sweep(), rate_rps=7).to_dict()["data"] == []


def four_requests(**parts: list[int]) -> pd.DataFrame:
    """A load run's requests table of four requests arriving 1 ms apart, all ok, with these
    ``batch_wait_ns``, ``queue_wait_ns``, ``service_ns`` and ``batch``; end to end is their sum."""
    requests = pd.DataFrame(
        {"request": np.arange(4), "arrival_ns": [0, 1_000_000, 2_000_000, 3_000_000], **parts}
    )
    requests["batch_size"] = requests.groupby("batch")["request"].transform("size")
    requests["ok"] = True
    requests["dur_ns"] = (
        requests["batch_wait_ns"] + requests["queue_wait_ns"] + requests["service_ns"]
    )
    return requests


def test_queueing_breakdown_of_a_load_summary():
    requests = four_requests(
        batch_wait_ns=[2_000_000, 1_000_000, 0, 0],
        queue_wait_ns=[0, 0, 500_000, 500_000],
        service_ns=[3_000_000, 3_000_000, 3_000_000, 3_000_000],
        batch=[0, 0, 1, 1],
    )
    fig = queueing_breakdown_figure(load_summary(requests)).to_dict()
    bars = {t["name"]: decode(t["y"]) for t in fig["data"]}
    assert list(fig["data"][0]["x"]) == [
        "mean"
    ]  # percentiles of parts taken apart are never stacked
    assert (
        bars["batch wait"][0] == 0.75
        and bars["queue wait"][0] == 0.25
        and bars["service"][0] == 3.0
    )
    assert bars["end to end"][0] == 4.0  # means add up exactly
    assert fig["layout"]["barmode"] == "stack"


def test_queueing_breakdown_stacks_the_request_at_each_percentile_whose_parts_add_up():
    """Stacked p99s of the parts stood at 24 ms over an end-to-end p99 of 19.4 ms (notebook 9)."""
    from workbench.batching.summary import percentile_requests

    requests = four_requests(
        batch_wait_ns=[5_000_000, 0, 1_000_000, 0],
        queue_wait_ns=[0, 6_000_000, 0, 0],
        service_ns=[1_000_000, 1_000_000, 3_000_000, 2_000_000],
        batch=[0, 1, 2, 3],
    )
    summary = load_summary(requests)
    stacked_p99 = sum(summary[c]["p99_ms"] for c in ("batch_wait", "queue_wait", "service"))
    assert stacked_p99 > 1.9 * summary["end_to_end"]["p99_ms"]  # 13.7 ms of parts over a 7.0 ms p99
    fig = queueing_breakdown_figure(
        summary, at=percentile_requests(requests)
    ).to_dict()  # e2e: 6, 7, 4, 2 ms
    assert list(fig["data"][0]["x"]) == ["mean", "p50 request (#2)", "p99 request (#1)"]
    parts = np.array([decode(t["y"]) for t in fig["data"][:3]])
    total = decode(fig["data"][3]["y"])
    assert (
        total == [4.75, 4.0, 7.0] and parts.sum(axis=0).tolist() == total
    )  # every stack is its request
    assert fig["layout"]["barmode"] == "stack"


def test_queueing_breakdown_of_a_sweep():
    table = toy_sweep().head(2)
    fig = queueing_breakdown_figure(table, stat="p99_ms").to_dict()
    assert list(fig["data"][0]["x"]) == ["100 req/s bs=1 wait=0", "100 req/s bs=1 wait=2"]
    assert decode(fig["data"][0]["y"]) == [0.0, 2.0]  # batch wait p99
    assert decode(fig["data"][3]["y"]) == pytest.approx(table["p99_ms"].tolist())
    assert (
        fig["layout"]["barmode"] == "group"
    )  # percentiles of the parts do not add up: not stacked
    with pytest.raises(ConfigError, match="stat="):
        queueing_breakdown_figure(table, stat="mean_ms")


def test_real_sweep_feeds_every_batching_figure():
    model = ServiceModel({1: np.array([1_000_000, 1_200_000]), 8: np.array([2_000_000, 2_400_000])})
    table = sweep(model, [200, 900], [1, 8], [0, 2], requests=300)
    for fig in (
        batching_curves_figure(table),
        wait_time_figure(table),
        queueing_breakdown_figure(table),
    ):
        assert len(fig.data) >= 2 and len(fig.to_json()) < 60_000


def test_empty_and_bad_sweeps():
    empty = toy_sweep().iloc[0:0]
    assert (
        batching_curves_figure(empty)
        .to_dict()["layout"]["annotations"][0]["text"]
        .startswith("empty sweep")
    )
    with pytest.raises(ConfigError, match="missing columns"):
        batching_curves_figure(toy_sweep().drop(columns=["throughput_rps"]))


def test_latency_curves_log_axis_is_labelled_at_decades_only():
    """p50 1.1-4.2 ms, p99 3.3-12.6 ms and an SLA of 50 ms: the decades 1, 10, 100 ms, no minor tick numbers."""
    axis = batching_curves_figure(toy_sweep(), sla_ms=50).to_dict()["layout"]["yaxis"]
    assert (axis["type"], axis["dtick"], axis["range"], axis["ticksuffix"]) == (
        "log",
        1,
        [0, 2],
        " ms",
    )
    assert axis["minor"]["ticks"] == ""
    assert (
        batching_curves_figure(toy_sweep(), log_y=False).to_dict()["layout"]["yaxis"]["type"]
        == "linear"
    )


def test_the_curve_draws_the_seeds_p99_range_as_error_bars():
    """Issue 40: near capacity one seeded run's p99 fell as throughput rose; the seeds' range is drawn."""
    sweep = pd.DataFrame(
        {
            "rate_rps": [100.0, 200.0],
            "max_batch_size": [8, 8],
            "max_wait_ms": [5.0, 5.0],
            "p50_ms": [5.0, 8.0],
            "p99_ms": [10.0, 40.0],
            "p99_lo_ms": [9.0, 25.0],
            "p99_hi_ms": [12.0, 90.0],
            "throughput_rps": [99.0, 197.0],
            "stable": [True, True],
        }
    )
    fig = batching_curves_figure(sweep).to_dict()
    p99, p50 = fig["data"][:2]
    bars = p99["error_y"]
    assert (decode(bars["array"]), decode(bars["arrayminus"])) == ([2.0, 50.0], [1.0, 15.0])
    assert "error_y" not in p50
    assert fig["layout"]["title"]["text"].startswith(
        "Latency vs throughput (solid p99 (bars: its range"
    )
