import pytest

from workbench.analysis import steps
from workbench.trace import load_trace
from tests.support import tables
from tests.support.synthetic import TraceBuilder, example_trace

K = 1_000


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    return load_trace(example_trace().write(tmp_path_factory.mktemp("s") / "t.json"))


def test_profiler_steps_with_launched_work(events):
    table = tables.profiler_steps(events)
    assert table["step"].tolist() == [1, 2]
    assert table["dur_ns"].tolist() == [100 * K, 100 * K]
    assert table["kernel_count"].tolist() == [2, 2]  # relu runs after step 1 ends: still step 1's
    assert table["kernel_ns"].tolist() == [16 * K, 11 * K]
    assert table["memcpy_ns"].tolist() == [12 * K, 0]
    assert (table["memset_count"].tolist(), table["memset_ns"].tolist()) == ([0, 1], [0, 250])


def test_step_boundaries_extend_to_launched_gpu_work(events):
    bounds = steps.step_boundaries(events)
    t0 = events.events["ts_ns"].min()
    assert (bounds["start_ns"] - t0).tolist() == [0, 300 * K]
    assert (bounds["end_ns"] - t0).tolist() == [204 * K, 400 * K]


def test_breakdown_priority_rule_exact(events):
    rows = steps.step_breakdown(events).set_index("step")
    one, two = rows.loc["1"], rows.loc["2"]
    assert (
        one["kernel_ns"],
        one["memcpy_ns"],
        one["runtime_ns"],
        one["cpu_exec_ns"],
        one["other_ns"],
    ) == (16 * K, 10 * K, 14 * K, 24 * K, 140 * K)
    assert one["total_ns"] == 204 * K
    assert (two["kernel_ns"], two["memset_ns"], two["runtime_ns"], two["other_ns"]) == (
        11 * K,
        0,
        60_500,
        28_500,
    )
    cats = [f"{c}_ns" for c in (*steps.CATEGORIES, "other")]
    assert (rows[cats].sum(axis=1) == rows["total_ns"]).all()


def test_no_steps_gives_one_all_entry(tmp_path):
    b = (
        TraceBuilder()
        .op("aten::add", 0, 10 * K)
        .runtime("cudaLaunchKernel", 1 * K, 2 * K, correlation=1)
    )
    b.kernel("k", 20 * K, 5 * K, 1).op("nccl:all_reduce", 12 * K, 3 * K)
    b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 30 * K, 4 * K)
    rows = steps.step_breakdown(load_trace(b.write(tmp_path / "t.json")))
    assert rows["step"].tolist() == ["all"]
    row = rows.iloc[0]
    assert (row["start_ns"], row["end_ns"]) == (0, 34 * K)
    assert (row["kernel_ns"], row["runtime_ns"], row["communication_ns"], row["dataloader_ns"]) == (
        5 * K,
        2 * K,
        3 * K,
        4 * K,
    )
    assert (row["cpu_exec_ns"], row["other_ns"]) == (8 * K, 12 * K)
    assert tables.profiler_steps(load_trace(tmp_path / "t.json")).empty


def test_gpu_annotation_copies_of_steps_are_not_steps(tmp_path):
    b = TraceBuilder().annotation("ProfilerStep#3", 0, 10 * K)
    b.x("gpu_user_annotation", "ProfilerStep#3", 1 * K, 5 * K, pid=0, tid=7)
    assert tables.profiler_steps(load_trace(b.write(tmp_path / "t.json")))["step"].tolist() == [3]
