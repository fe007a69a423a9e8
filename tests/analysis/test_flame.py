import numpy as np
import pandas as pd
import pytest

from workbench.analysis import flame
from workbench.trace import load_trace
from tests.support.synthetic import TraceBuilder, example_trace

K = 1_000


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return load_trace(example_trace().write(tmp_path_factory.mktemp("f") / "t.json"))


@pytest.fixture(scope="module")
def tree(trace):
    """The whole process as profiled (nothing cut): the nesting rules on every event."""
    return flame.flame_tree(trace.events, from_stages=False)


def node(tree, *path):
    parent = -1
    for name in path:
        row = tree[(tree["parent"] == parent) & (tree["name"] == name)]
        assert len(row) == 1, (path, name)
        parent = int(row["id"].iloc[0])
    return row.iloc[0]


def test_columns_and_parent_order(tree):
    assert list(tree.columns) == flame.COLUMNS
    assert (tree["parent"] < tree["id"]).all()
    assert tree["id"].tolist() == list(range(len(tree)))


def test_steps_merge_and_self_time(tree):
    step = node(tree, "ProfilerStep")
    assert (step["count"], step["total_ns"], step["self_ns"]) == (2, 200 * K, 79_500)
    assert step["gpu_ns"] == 39_250
    forward = node(tree, "ProfilerStep", "forward")
    assert (forward["kind"], forward["total_ns"], forward["self_ns"]) == ("stage", 59 * K, 12 * K)


def test_gpu_work_under_its_launch_call(tree):
    gemm = node(tree, "ProfilerStep", "forward", "aten::linear", "cudaLaunchKernel", "gemm")
    assert (gemm["kind"], gemm["total_ns"], gemm["depth"]) == ("kernel", 12 * K, 4)
    copy = node(
        tree,
        "ProfilerStep",
        "forward",
        "aten::copy_",
        "cudaMemcpyAsync",
        "Memcpy HtoD (Pageable -> Device)",
    )
    assert copy["bytes"] == 1_200_000
    g = [node(tree, "ProfilerStep", "cudaGraphLaunch", n)["total_ns"] for n in ("g1", "g2")]
    assert g == [3 * K, 8 * K]
    orphan = node(tree, flame.NO_LAUNCH, "orphan")
    assert (orphan["count"], orphan["total_ns"]) == (2, 3 * K)


def test_prune_folds_small_nodes(tree):
    pruned = flame.prune(
        tree, min_share=0.3
    )  # of 203 us of roots: keeps nodes >= 60.9 us (GPU: >= 12.7 us)
    assert (pruned["parent"] < pruned["id"]).all()
    kept = set(pruned.loc[pruned["name"] != flame.OTHER, "name"])
    assert kept == {"ProfilerStep", "forward"}
    others = pruned[pruned["name"] == flame.OTHER].set_index("parent")["total_ns"]
    ids = {name: int(pruned.loc[pruned["name"] == name, "id"].iloc[0]) for name in kept}
    # (no launch call) 3 us at the root; 1 + 60 + 0.5 us of calls under the step; linear + copy_ under forward
    assert others.to_dict() == {-1: 3 * K, ids["ProfilerStep"]: 61_500, ids["forward"]: 47 * K}


def test_prune_keeps_gpu_work_above_the_share_of_gpu_time(tree):
    # 20 %: host nodes >= 40.6 us, or GPU time >= 20 % of the roots' 42.25 us of GPU time (8.45 us):
    # the 12 us gemm and 12 us copy stay with the calls that launched them (5 and 3 us of host time)
    pruned = flame.prune(tree, min_share=0.2)
    kept = pruned.loc[pruned["name"] != flame.OTHER, "name"].tolist()
    assert kept == [
        "ProfilerStep",
        "forward",
        "aten::linear",
        "cudaLaunchKernel",
        "aten::copy_",
        "cudaMemcpyAsync",
        "cudaGraphLaunch",
        "gemm",
        "Memcpy HtoD (Pageable -> Device)",
    ]
    others = pruned[pruned["name"] == flame.OTHER].set_index("parent")[["total_ns", "gpu_ns"]]
    ids = {name: int(pruned.loc[pruned["name"] == name, "id"].iloc[0]) for name in kept}
    # g1 + g2 (3 + 8 us, under 8.45 us each) fold under the graph launch; the stream sync (24 us, no GPU) under copy_
    assert others.loc[ids["cudaGraphLaunch"]].tolist() == [11 * K, 11 * K]
    assert others.loc[ids["aten::copy_"]].tolist() == [24 * K, 0]
    assert flame.pruned_sizes(tree, [0.2])[0] == len(pruned) == 13


def test_gpu_work_by_stage_sums_kernels_and_copies_per_root(tree):
    gpu = flame.gpu_work_by_stage(tree)
    assert list(gpu.columns) == flame.GPU_WORK_COLUMNS
    rows = [(r.stage, r.name, r.gpu_ns, r.count) for r in gpu.itertuples()]
    assert rows[0] == ("ProfilerStep", "gemm", 12 * K, 1)
    assert gpu["bytes"].tolist()[:2] == [pd.NA, 1_200_000]
    assert {r[1]: r[2] for r in rows if r[0] == "ProfilerStep"} == {
        "gemm": 12 * K,
        "Memcpy HtoD (Pageable -> Device)": 12 * K,
        "g2": 8 * K,
        "relu": 4 * K,
        "g1": 3 * K,
        "Memset (Device)": 250,
    }
    assert rows[-1] == ("(no launch call)", "orphan", 3 * K, 2)
    assert gpu["gpu_ns"].sum() == 42_250
    assert flame.gpu_work_by_stage(tree[~tree["kind"].isin(["kernel", "memcpy", "memset"])]).empty


def test_flame_is_fast_on_many_events(tmp_path):
    b = TraceBuilder()
    n = 20_000
    for i in range(n):
        t = i * 10 * K
        b.op("aten::linear", t, 8 * K).op("aten::addmm", t + K, 5 * K)
        b.runtime("cudaLaunchKernel", t + 2 * K, 2 * K, correlation=i + 1).kernel(
            "k", t + 5 * K, K, i + 1
        )
    tree = flame.flame_tree(load_trace(b.write(tmp_path / "t.json")).events)
    assert len(tree) == 4
    assert tree["count"].tolist() == [n, n, n, n]
    assert np.array_equal(tree["depth"].to_numpy(), [0, 1, 2, 3])


def test_the_tree_starts_at_the_stages_and_counts_what_was_cut(trace):
    cut_tree = flame.flame_tree(trace.events)
    roots = cut_tree[cut_tree["parent"] == -1]
    assert roots["name"].tolist() == [
        "forward",
        flame.NO_LAUNCH,
    ]  # the orphans had no launch call to cut
    forward = node(cut_tree, "forward")
    assert (forward["kind"], forward["total_ns"], forward["self_ns"], forward["gpu_ns"]) == (
        "stage",
        59 * K,
        12 * K,
        24 * K,
    )
    assert node(cut_tree, "forward", "aten::linear", "cudaLaunchKernel", "gemm")["depth"] == 3
    assert "relu" not in set(cut_tree["name"]) and "g1" not in set(
        cut_tree["name"]
    )  # launched outside: cut
    # steps, the late launch, the graph launch and the memset call; relu, g1, g2 and the memset
    assert cut_tree.attrs["cut"] == {
        "host_events": 5,
        "gpu_events": 4,
        "outside_ns": 141 * K,
        "traced_ns": 200 * K,
        "frames": ["ProfilerStep", "cudaGraphLaunch", "cudaLaunchKernel", "cudaMemsetAsync"],
        "note": "starts at the stages: 5 harness and instrumentation events cut (ProfilerStep, cudaGraphLaunch, "
        "cudaLaunchKernel, cudaMemsetAsync); 0.141 ms of the 0.2 ms traced is outside the stages; "
        "4 GPU events they launched cut",
    }


def py(b, name, ts_ns, dur_ns):
    return b.x("python_function", name, ts_ns, dur_ns)


def test_harness_and_instrumentation_frames_are_cut_inside_and_around_stages(tmp_path):
    b = TraceBuilder()
    py(b, "runpy.py(198): _run_module_as_main", 0, 100 * K)
    py(b, "workbench/runner.py(393): _traced_requests", 1 * K, 98 * K)
    py(b, "workbench/memory.py(169): __enter__", 2 * K, 3 * K)  # the memory probe, beside the stage
    b.stage("decode", 10 * K, 50 * K)
    py(b, "generate.py(40): decode", 11 * K, 40 * K)
    py(
        b, "torch/autograd/profiler.py(918): __enter__", 12 * K, 1 * K
    )  # instrumentation inside: cut
    b.op("aten::mm", 20 * K, 20 * K)
    cut_tree = flame.flame_tree(load_trace(b.write(tmp_path / "t.json")).events)
    assert [(r.name, r.depth) for r in cut_tree.itertuples()] == [
        ("decode", 0),
        ("generate.py(40): decode", 1),
        ("aten::mm", 2),
    ]
    assert cut_tree.attrs["cut"]["host_events"] == 4
    assert cut_tree.attrs["cut"]["frames"] == [
        "runpy.py _run_module_as_main",
        "runner.py _traced_requests",
        "memory.py __enter__",
        "profiler.py __enter__",
    ]


def test_a_trace_without_stages_keeps_every_event(tmp_path):
    b = py(TraceBuilder(), "main.py(1): main", 0, 10 * K).op("aten::mm", 1 * K, 5 * K)
    whole = flame.flame_tree(load_trace(b.write(tmp_path / "t.json")).events)
    assert whole["name"].tolist() == ["main.py(1): main", "aten::mm"] and whole.attrs["cut"] is None
