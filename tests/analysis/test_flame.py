import numpy as np
import pytest

from workbench.analysis import flame
from workbench.trace import load_trace
from tests.support.synthetic import TraceBuilder, example_trace

K = 1_000


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return flame.flame_tree(load_trace(example_trace().write(tmp_path_factory.mktemp("f") / "t.json")).events)


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
    copy = node(tree, "ProfilerStep", "forward", "aten::copy_", "cudaMemcpyAsync", "Memcpy HtoD (Pageable -> Device)")
    assert copy["bytes"] == 1_200_000
    g = [node(tree, "ProfilerStep", "cudaGraphLaunch", n)["total_ns"] for n in ("g1", "g2")]
    assert g == [3 * K, 8 * K]
    orphan = node(tree, flame.NO_LAUNCH, "orphan")
    assert (orphan["count"], orphan["total_ns"]) == (2, 3 * K)


def test_prune_folds_small_nodes(tree):
    pruned = flame.prune(tree, min_share=0.2)  # of 203 us of roots: keeps nodes >= 40.6 us
    assert (pruned["parent"] < pruned["id"]).all()
    kept = set(pruned.loc[pruned["name"] != flame.OTHER, "name"])
    assert kept == {"ProfilerStep", "forward", "cudaGraphLaunch"}
    others = pruned[pruned["name"] == flame.OTHER].set_index("parent")["total_ns"]
    ids = {name: int(pruned.loc[pruned["name"] == name, "id"].iloc[0]) for name in kept}
    # (no launch call) 3 us at the root; 1 + 0.5 us of calls under the step; linear + copy_
    # under forward; g1 + g2 under the graph launch
    assert others.to_dict() == {-1: 3 * K, ids["ProfilerStep"]: 1_500, ids["forward"]: 47 * K,
                                ids["cudaGraphLaunch"]: 11 * K}


def test_flame_is_fast_on_many_events(tmp_path):
    b = TraceBuilder()
    n = 20_000
    for i in range(n):
        t = i * 10 * K
        b.op("aten::linear", t, 8 * K).op("aten::addmm", t + K, 5 * K)
        b.runtime("cudaLaunchKernel", t + 2 * K, 2 * K, correlation=i + 1).kernel("k", t + 5 * K, K, i + 1)
    tree = flame.flame_tree(load_trace(b.write(tmp_path / "t.json")).events)
    assert len(tree) == 4
    assert tree["count"].tolist() == [n, n, n, n]
    assert np.array_equal(tree["depth"].to_numpy(), [0, 1, 2, 3])
