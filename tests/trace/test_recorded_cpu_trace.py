"""A real torch.profiler CPU trace recorded by tests/data/traces/make_cpu_trace.py."""

from pathlib import Path

import pytest

from workbench.analysis import flame
from workbench.analysis.trace_report import analyze
from workbench.trace import load_trace

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "cpu_stages.pt.trace.json.gz"


@pytest.fixture(scope="module")
def trace():
    return load_trace(TRACE)


def test_cpu_trace_loads_with_exact_integer_times(trace):
    assert trace.meta["platform"] == "cpu" and trace.meta["schema"] == "kineto"
    assert (trace.events["dur_ns"] >= 0).all()
    assert trace.events["ts_ns"].dtype == "int64"


def test_gpu_sections_are_empty_not_errors(trace):
    r = analyze(trace)
    assert r["kernels"]["count"] == 0 and r["gpu"]["span_us"] is None
    assert r["memcpy"]["by_kind"]["HtoD"]["count"] == 0 and r["launch_pairs"]["count"] == 0


def test_steps_and_stages_found(trace):
    r = analyze(trace)
    assert [s["name"] for s in r["steps"]] == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    assert [(s["stage"], s["count"]) for s in r["stages"]] == [
        ("preprocess", 3),
        ("forward", 3),
        ("postprocess", 3),
    ]
    for row in r["step_breakdown"]:
        assert row["cpu_exec_us"] > 0 and row["kernel_us"] == 0.0


def test_flame_tree_starts_at_the_stages_and_the_whole_tree_nests_them_under_steps(trace):
    cut = flame.flame_tree(trace.events)
    roots = cut[cut["parent"] == -1]
    assert set(roots["name"]) == {"preprocess", "forward", "postprocess"} and set(
        roots["kind"]
    ) == {"stage"}
    assert cut.attrs["cut"]["frames"][0] == "ProfilerStep"
    tree = flame.flame_tree(trace.events, from_stages=False)
    step = tree[(tree["parent"] == -1) & (tree["name"] == "ProfilerStep")]
    assert len(step) == 1 and int(step["count"].iloc[0]) == 3
    stages = tree[tree["parent"] == int(step["id"].iloc[0])]
    assert set(stages.loc[stages["kind"] == "stage", "name"]) == {
        "preprocess",
        "forward",
        "postprocess",
    }
    assert len(flame.prune(tree, 0.05)) <= len(tree)
