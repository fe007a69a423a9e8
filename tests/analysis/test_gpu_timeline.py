import pytest

from workbench.analysis import gpu_timeline
from workbench.trace import load_trace
from tests.support import tables
from tests.support.synthetic import TraceBuilder, example_trace


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    return load_trace(example_trace().write(tmp_path_factory.mktemp("g") / "t.json"))


def test_span_busy_idle_over_all_devices(events):
    s = gpu_timeline.gpu_time_summary(events)
    assert (s["span_ns"], s["busy_ns"], s["idle_ns"]) == (571_000, 40_000, 531_000)
    assert s["idle_fraction"] == pytest.approx(531_000 / 571_000)


def test_stream_idle_split_by_hta_rule(events):
    idle = gpu_timeline.stream_idle(events).set_index(["device", "stream"])
    s7 = idle.loc[(0, 7)]
    assert (s7["host_wait_ns"], s7["kernel_wait_ns"], s7["other_ns"], s7["idle_ns"]) == (
        334_000,
        2_000,
        0,
        336_000,
    )
    assert idle.loc[(0, 8), "host_wait_ns"] == 340_000
    dev1 = idle.loc[(1, 7)]  # no launch call: classified by the gap alone
    assert (dev1["other_ns"], dev1["host_wait_ns"], dev1["count"]) == (98_000, 0, 2)


def test_busy_over_time_bins_sum_to_busy(events):
    bins = gpu_timeline.busy_over_time(events, bins=7)
    assert len(bins) == 7
    assert bins["busy_ns"].sum() == 40_000
    assert bins["busy_fraction"].between(0, 1).all()


def test_cpu_only_trace_has_empty_gpu_sections(tmp_path):
    events = load_trace(TraceBuilder().op("aten::add", 0, 5_000).write(tmp_path / "t.json"))
    assert gpu_timeline.gpu_time_summary(events)["span_ns"] is None
    assert gpu_timeline.stream_idle(events).empty
    assert gpu_timeline.busy_over_time(events).empty


def test_kernel_summary_exact(events):
    s = gpu_timeline.kernel_summary(events)
    assert s["count"] == 6
    assert s["total_ns"] == 30_000
    assert s["under_10us"] == 5  # gemm is 12 us
    assert s["busy_ns"] == 30_000  # no two kernels overlap
    assert (s["min_ns"], s["max_ns"], s["distinct_names"]) == (1_000, 12_000, 5)


def test_busy_counts_overlap_once(tmp_path):
    b = TraceBuilder()
    b.kernel("a", 0, 10_000, 1, stream=7).kernel("b", 5_000, 10_000, 2, stream=8)
    events = load_trace(b.write(tmp_path / "t.json"))
    s = gpu_timeline.kernel_summary(events)
    assert (s["total_ns"], s["busy_ns"], s["under_10us"]) == (20_000, 15_000, 0)


def test_top_kernels_sorted_by_total(events):
    top = tables.top_kernels(events, n=3)
    assert top["name"].tolist() == ["gemm", "g2", "relu"]
    assert top["total_ns"].tolist() == [12_000, 8_000, 4_000]
    assert top["share"].iloc[0] == pytest.approx(12_000 / 30_000)
    orphan = tables.top_kernels(events, n=None).set_index("name").loc["orphan"]
    assert (orphan["count"], orphan["total_ns"], orphan["mean_ns"]) == (2, 3_000, 1_500.0)


def test_no_kernels_gives_zeros_and_none(tmp_path):
    events = load_trace(TraceBuilder().op("aten::add", 0, 5).write(tmp_path / "t.json"))
    s = gpu_timeline.kernel_summary(events)
    assert (s["count"], s["total_ns"], s["busy_ns"]) == (0, 0, None)
    assert tables.top_kernels(events).empty
