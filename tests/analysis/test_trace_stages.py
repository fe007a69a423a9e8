import pytest

from workbench.analysis import trace_stages
from workbench.trace import load_trace
from tests.support.synthetic import TraceBuilder, example_trace

K = 1_000


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    return load_trace(example_trace().write(tmp_path_factory.mktemp("st") / "t.json"))


def test_stage_summary_exact(events):
    row = trace_stages.trace_stage_summary(events).set_index("stage").loc["forward"]
    assert (row["count"], row["host_ns"], row["gpu_ns"], row["kernel_count"]) == (
        1,
        59 * K,
        24 * K,
        1,
    )
    assert (row["launch_count"], row["launch_ns"]) == (1, 5 * K)
    assert (row["transfer_count"], row["transfer_bytes"], row["transfer_ns"]) == (
        1,
        1_200_000,
        12 * K,
    )
    assert (row["sync_count"], row["sync_ns"]) == (1, 24 * K)
    assert (bool(row["launch_bound"]), bool(row["transfer_bound"]), bool(row["sync_heavy"])) == (
        False,
        True,
        True,
    )


def test_launch_bound_stage(tmp_path):
    b = TraceBuilder().stage("decode", 0, 100 * K)
    for i in range(10):  # 10 launches of 4 us each, kernels of 1 us
        b.runtime("cudaLaunchKernel", i * 10 * K, 4 * K, correlation=i + 1)
        b.kernel("tiny", i * 10 * K + 5 * K, 1 * K, i + 1)
    row = trace_stages.trace_stage_summary(load_trace(b.write(tmp_path / "t.json"))).iloc[0]
    assert row["stage"] == "decode" and row["launch_count"] == 10 and row["gpu_ns"] == 10 * K
    assert (
        bool(row["launch_bound"])
        and not bool(row["transfer_bound"])
        and not bool(row["sync_heavy"])
    )


def test_only_stage_prefixed_ranges_count(tmp_path):
    b = (
        TraceBuilder()
        .annotation("forward", 0, 10 * K)
        .annotation("workbench.stage::pre", 20 * K, 5 * K)
    )
    b.annotation("workbench.stage::pre", 40 * K, 7 * K)
    summary = trace_stages.trace_stage_summary(load_trace(b.write(tmp_path / "t.json")))
    assert summary["stage"].tolist() == ["pre"]
    assert (summary["count"].iloc[0], summary["host_ns"].iloc[0]) == (2, 12 * K)


def test_no_stages_gives_empty_table(tmp_path):
    events = load_trace(TraceBuilder().op("aten::add", 0, 5).write(tmp_path / "t.json"))
    out = trace_stages.trace_stage_summary(events)
    assert out.empty and "launch_bound" in out.columns
