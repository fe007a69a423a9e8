import pytest

from workbench.analysis import launches
from workbench.trace import load_trace
from tests.support import tables
from tests.support.synthetic import example_trace


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    return load_trace(example_trace().write(tmp_path_factory.mktemp("l") / "t.json"))


def test_launch_pairs_hta_definition(events):
    pairs = launches.launch_pairs(events).sort_values("correlation")
    assert pairs["correlation"].tolist() == [
        1,
        2,
        3,
        5,
    ]  # the graph launch is not an HTA launch name
    assert pairs["launch_delay_ns"].tolist() == [20_000, 15_000, 138_000, 19_500]
    s = launches.launch_pair_summary(pairs)
    assert s == {
        "count": 4,
        "cpu_over_50us": 0,
        "delay_over_100us": 1,
        "gpu_shorter_than_cpu": 1,
        "short_kernels": 1,
        "cpu_dur_ns": 9_500,
        "gpu_dur_ns": 28_250,
        "launch_delay_ns": 192_500,
        "launch_delay_max_ns": 138_000,
    }


def test_launch_delay_clipped_at_zero(tmp_path):
    from tests.support.synthetic import TraceBuilder

    b = (
        TraceBuilder()
        .runtime("cudaLaunchKernel", 0, 10_000, correlation=1)
        .kernel("k", 5_000, 1_000, 1)
    )
    pairs = launches.launch_pairs(load_trace(b.write(tmp_path / "t.json")))
    assert pairs["launch_delay_ns"].tolist() == [0]


def test_launch_calls_keep_graph_launches_apart(events):
    calls = tables.launch_calls(events)
    graph = calls[calls["graph"]]
    assert graph["gpu_count"].tolist() == [2] and graph["gpu_dur_ns"].tolist() == [11_000]
    assert launches.launch_summary(calls) == {
        "count": 2,
        "total_ns": 6_000,
        "graph_count": 1,
        "graph_total_ns": 60_000,
        "graph_gpu_count": 2,
    }
    plain = calls[~calls["graph"]].sort_values("ts_ns")
    assert plain["launch_delay_ns"].tolist() == [20_000, 138_000]


def test_gpu_work_without_launch_call_has_null_launch(events):
    joined = tables.gpu_work_with_launch(events)
    orphans = joined[joined["name"] == "orphan"]
    assert len(orphans) == 2 and orphans["launch_name"].isna().all()


def test_distribution_percentiles(events):
    dist = launches.launch_distribution(launches.launch_pairs(events)).set_index("metric")
    assert dist.loc["cpu_dur", "count"] == 4
    assert dist.loc["cpu_dur", "p50_ns"] == pytest.approx(2_000.0)  # 500, 1000, 3000, 5000
    assert dist.loc["launch_delay", "max_ns"] == 138_000.0
