import pandas as pd
import pytest
from plots_helpers import decode

from workbench.errors import ConfigError
from workbench.plots import flame_figure, trace_flame_figure
from workbench.analysis.flame import flame_tree
from workbench.plots.flame import display_totals, fit_tree
from workbench.plots.style import KIND_COLORS


def small_tree() -> pd.DataFrame:
    """stage -> aten::linear -> cudaLaunchKernel -> gemm kernel; stage -> copy launch -> HtoD pinned copy."""
    rows = [
        (0, -1, "workbench.stage::forward", "stage", 10_000, 100_000, 1, None),
        (1, 0, "aten::linear", "cpu_op", 20_000, 60_000, 2, None),
        (2, 1, "cudaLaunchKernel", "runtime", 10_000, 40_000, 2, None),
        (3, 2, "ampere_sgemm_128x64_tn", "kernel", 30_000, 30_000, 2, None),
        (4, 0, "cudaMemcpyAsync", "runtime", 5_000, 30_000, 1, None),
        (5, 4, "Memcpy HtoD (Pinned -> Device)", "memcpy", 25_000, 25_000, 1, 4_000_000),
    ]
    df = pd.DataFrame(rows, columns=["id", "parent", "name", "kind", "self_ns", "total_ns", "count", "bytes"])
    return df.astype({"bytes": "Int64"})


def test_icicle_ids_parents_values_from_the_tree():
    trace = flame_figure(small_tree()).to_dict()["data"][0]
    assert trace["type"] == "icicle" and trace["branchvalues"] == "total"
    assert list(trace["ids"]) == ["0", "1", "2", "3", "4", "5"]
    assert list(trace["parents"]) == ["", "0", "1", "2", "0", "4"]
    assert decode(trace["values"]) == [100_000, 60_000, 40_000, 30_000, 30_000, 25_000]
    assert list(trace["labels"])[3] == "ampere_sgemm_128x64_tn"


def test_colors_by_kind_and_hover_numbers():
    trace = flame_figure(small_tree()).to_dict()["data"][0]
    colors = list(trace["marker"]["colors"])
    assert colors == [KIND_COLORS[k] for k in ("stage", "cpu_op", "runtime", "kernel", "runtime", "memcpy_htod_pinned")]
    copy = trace["customdata"][5]
    assert copy[1:] == ["memcpy HtoD pinned", "25 us", "25 us", "1", "4 MB"]
    assert trace["customdata"][1][2:5] == ["60 us", "20 us", "2"]


def test_legend_annotation_lists_kinds_present():
    text = flame_figure(small_tree()).to_dict()["layout"]["annotations"][0]["text"]
    assert "kernel" in text and "memcpy HtoD pinned" in text and "memset" not in text


def test_children_larger_than_parent_are_made_to_fit():
    tree = small_tree()
    tree.loc[tree["id"] == 3, "total_ns"] = 90_000  # GPU time under a 40 us launch call
    assert display_totals(tree).tolist() == [120_000, 90_000, 90_000, 90_000, 30_000, 25_000]


def test_flame_figure_of_a_real_flame_tree(trace_events):
    fig = trace_flame_figure(trace_events).to_dict()
    trace = fig["data"][0]
    tree = flame_tree(trace_events)
    assert len(trace["ids"]) == len(tree) == 13  # starts at the stage: the ProfilerStep above it is cut
    names = list(trace["labels"])
    values = dict(zip(names, decode(trace["values"])))
    assert "ProfilerStep" not in values and values["forward"] == 890_000
    assert fig["layout"]["title"]["text"] == "Flame graph"
    assert fig["layout"]["title"]["subtitle"]["text"] == (  # wrapped at 100 characters, a subtitle: never clipped
        "starts at the stages: 1 harness and instrumentation events cut (ProfilerStep); 0.11 ms of the 1 ms<br>"
        "traced is outside the stages")
    # the 50 us kernel hangs under a 5 us launch call: the call and its operator are drawn 50 us wide
    assert values["vectorized_elementwise_kernel"] == 50_000
    assert decode(trace["values"])[names.index("aten::add")] == 50_000
    assert trace["customdata"][names.index("aten::add")][2] == "20 us"  # hover keeps the real total
    assert list(trace["marker"]["colors"])[names.index("forward")] == KIND_COLORS["stage"]
    assert list(trace["marker"]["colors"])[names.index("Memcpy HtoD (Pageable -> Device)")] == KIND_COLORS["memcpy_htod_pageable"]


def test_large_trees_are_folded_by_the_analysis_prune(trace_events):
    tree = flame_tree(trace_events, from_stages=False)  # the whole tree, ProfilerStep included
    assert fit_tree(tree, 100) == (tree, None)
    small, share = fit_tree(tree, 10)
    assert (len(small), share) == (8, 0.02)  # at 1 % 12 nodes remain: too many
    assert "(other)" in small["name"].tolist()
    title = flame_figure(tree, max_nodes=10).to_dict()["layout"]["title"]["text"]
    assert title == "Flame graph (14 nodes; under 2% of the total folded into (other))"


def test_cpu_only_trace_has_a_host_flame_graph(cpu_events):
    trace = trace_flame_figure(cpu_events).to_dict()["data"][0]
    assert list(trace["labels"]) == ["ProfilerStep", "aten::mm", "aten::relu"]


def test_empty_tree_and_bad_input():
    fig = flame_figure(small_tree().iloc[0:0]).to_dict()
    assert fig["data"] == [] and "empty flame tree" in fig["layout"]["annotations"][0]["text"]
    with pytest.raises(ConfigError, match="missing columns"):
        flame_figure(small_tree().drop(columns=["bytes"]))
    with pytest.raises(ConfigError, match="cycle"):
        display_totals(small_tree().assign(parent=[5, 0, 1, 2, 0, 4]))


def test_differential_flame_figure_draws_tail_widths_and_growth_colours():
    from workbench.plots.flame import differential_flame_figure

    stacks = {"tail_set": "slowest_1pct", "headline": "hydrate, 91 % of the slowest 1 % in redis read_response",
              "stages": {"hydrate": {"samples": {"slowest_1pct": 1200, "median": 3870}, "tree": [
                  {"id": 0, "parent": -1, "name": "hydrate", "tail": 1.0, "median": 1.0},
                  {"id": 1, "parent": 0, "name": "get_features", "tail": 1.0, "median": 0.4},
                  {"id": 2, "parent": 1, "name": "redis read_response", "tail": 0.91, "median": 0.4},
                  {"id": 3, "parent": 0, "name": "merge", "tail": 0.0, "median": 0.6}]}}}
    trace = differential_flame_figure(stacks).to_dict()["data"][0]
    assert list(trace["labels"]) == ["hydrate", "get_features", "redis read_response", "merge"]
    assert list(trace["parents"]) == ["", "0", "1", "0"]
    assert [round(c, 2) for c in trace["marker"]["colors"]] == [0.0, 0.6, 0.51, -0.6]
    fig = differential_flame_figure(stacks).to_dict()
    assert fig["layout"]["title"]["text"].startswith("hydrate: slowest 1 % minus median (sampled stacks; 1200 slow")
    assert "no sampled stacks" in differential_flame_figure(None).to_dict()["layout"]["annotations"][0]["text"]


def test_traced_tail_figure_draws_the_slow_requests_and_says_how_many_it_rests_on():
    from workbench.plots.flame import traced_tail_figure

    view = {"note": "the slow-request view rests on 5 traced requests: the slowest 1 against the median 1",
            "tree": [{"id": 0, "parent": -1, "name": "forward", "kind": "stage", "slow_ns": 90_000, "median_ns": 40_000},
                     {"id": 1, "parent": 0, "name": "aten::heavy", "kind": "cpu_op", "slow_ns": 5_000, "median_ns": 0}]}
    fig = traced_tail_figure(view).to_dict()
    trace = fig["data"][0]
    assert list(trace["labels"]) == ["forward", "aten::heavy"] and list(trace["marker"]["colors"]) == [0.05, 0.005]
    assert fig["layout"]["title"]["text"].endswith("<sup>the slow-request view rests on 5 traced requests: the "
                                                   "slowest 1 against the median 1</sup>")
    assert "no traced request" in traced_tail_figure({"tree": [], "note": "no traced request"}).to_dict()[
        "layout"]["annotations"][0]["text"]
