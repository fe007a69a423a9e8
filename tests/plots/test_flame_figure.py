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
    df = pd.DataFrame(
        rows, columns=["id", "parent", "name", "kind", "self_ns", "total_ns", "count", "bytes"]
    )
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
    assert colors == [
        KIND_COLORS[k]
        for k in ("stage", "cpu_op", "runtime", "kernel", "runtime", "memcpy_htod_pinned")
    ]
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
    assert (
        len(trace["ids"]) == len(tree) == 13
    )  # starts at the stage: the ProfilerStep above it is cut
    names = list(trace["labels"])
    values = dict(zip(names, decode(trace["values"])))
    assert "ProfilerStep" not in values and values["forward"] == 890_000
    assert fig["layout"]["title"]["text"] == "Flame graph"
    assert fig["layout"]["title"]["subtitle"][
        "text"
    ] == (  # wrapped at 100 characters, a subtitle: never clipped
        "starts at the stages: 1 harness and instrumentation events cut (ProfilerStep); 0.11 ms of the 1 ms<br>"
        "traced is outside the stages"
    )
    # the 50 us kernel hangs under a 5 us launch call: the call and its operator are drawn 50 us wide
    assert values["vectorized_elementwise_kernel"] == 50_000
    assert decode(trace["values"])[names.index("aten::add")] == 50_000
    assert trace["customdata"][names.index("aten::add")][2] == "20 us"  # hover keeps the real total
    assert list(trace["marker"]["colors"])[names.index("forward")] == KIND_COLORS["stage"]
    assert (
        list(trace["marker"]["colors"])[names.index("Memcpy HtoD (Pageable -> Device)")]
        == KIND_COLORS["memcpy_htod_pageable"]
    )


def test_large_trees_are_folded_by_the_analysis_prune(trace_events):
    tree = flame_tree(trace_events, from_stages=False)  # the whole tree, ProfilerStep included
    assert fit_tree(tree, 100) == (tree, None, False)
    small, share, _ = fit_tree(tree, 10)
    # a node stays while its host time or its GPU time is at least the share of all host / GPU time (87 us):
    # at 10 % the add kernel (50 us) and both copies (20, 10 us) stay; the 5 us gemm and the memset fold
    assert (len(small), share) == (10, 0.1)
    names = small["name"].tolist()
    assert (
        "(other)" in names
        and "Memcpy DtoH (Device -> Pinned)" in names
        and "ampere_sgemm_128x64_tn" not in names
    )
    title = flame_figure(tree, max_nodes=10).to_dict()["layout"]["title"]["text"]
    assert (
        title
        == "Flame graph (14 nodes; under 10% of the host and of the GPU time folded into (other))"
    )


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

    stacks = {
        "tail_set": "slowest_1pct",
        "headline": "hydrate, 91 % of the slowest 1 % in redis read_response",
        "stages": {
            "hydrate": {
                "samples": {"slowest_1pct": 1200, "median": 3870},
                "tree": [
                    {"id": 0, "parent": -1, "name": "hydrate", "tail": 1.0, "median": 1.0},
                    {"id": 1, "parent": 0, "name": "get_features", "tail": 1.0, "median": 0.4},
                    {
                        "id": 2,
                        "parent": 1,
                        "name": "redis read_response",
                        "tail": 0.91,
                        "median": 0.4,
                    },
                    {"id": 3, "parent": 0, "name": "merge", "tail": 0.0, "median": 0.6},
                ],
            }
        },
    }
    trace = differential_flame_figure(stacks).to_dict()["data"][0]
    assert list(trace["labels"]) == ["hydrate", "get_features", "redis read_response", "merge"]
    assert list(trace["parents"]) == ["", "0", "1", "0"]
    assert [round(c, 2) for c in trace["marker"]["colors"]] == [0.0, 0.6, 0.51, -0.6]
    fig = differential_flame_figure(stacks).to_dict()
    assert fig["layout"]["title"]["text"].startswith(
        "hydrate: slowest 1 % minus median (sampled stacks; 1200 slow"
    )
    # a box too narrow for a 10-px label shows none (the overlap test read 0.2 px labels)
    assert fig["layout"]["uniformtext"] == {"minsize": 10, "mode": "hide"}
    assert (
        "no sampled stacks"
        in differential_flame_figure(None).to_dict()["layout"]["annotations"][0]["text"]
    )


def test_traced_tail_figure_draws_the_slow_requests_and_says_how_many_it_rests_on():
    from workbench.plots.flame import traced_tail_figure

    view = {
        "note": "the slow-request view rests on 5 traced requests: the slowest 1 against the median 1",
        "tree": [
            {
                "id": 0,
                "parent": -1,
                "name": "forward",
                "kind": "stage",
                "slow_ns": 90_000,
                "median_ns": 40_000,
            },
            {
                "id": 1,
                "parent": 0,
                "name": "aten::heavy",
                "kind": "cpu_op",
                "slow_ns": 5_000,
                "median_ns": 0,
            },
        ],
    }
    fig = traced_tail_figure(view).to_dict()
    trace = fig["data"][0]
    assert list(trace["labels"]) == ["forward", "aten::heavy"] and list(
        trace["marker"]["colors"]
    ) == [0.05, 0.005]
    assert fig["layout"]["title"]["text"].endswith(
        "<sup>the slow-request view rests on 5 traced requests: the "
        "slowest 1 against the median 1</sup>"
    )
    assert (
        "no traced request"
        in traced_tail_figure({"tree": [], "note": "no traced request"}).to_dict()["layout"][
            "annotations"
        ][0]["text"]
    )


def test_recorded_cuda_run_shows_its_kernels_labelled_in_their_own_panel():
    """text-cuda-bs1-fp32 (recorded on an H100): 46 kernels of 3-160 us under 9 ms requests. By host time alone
    every kernel row was folded into (other); now the host icicle keeps the kernels above the share of GPU time,
    and a second icicle draws each stage's GPU work at GPU-time widths, so the big kernels get labels."""
    from pathlib import Path

    from workbench import load_run
    from workbench.plots.flame import GPU_LABEL_CHARS, GPU_LABEL_LINES, LABEL_MIN_PX
    from workbench.trace import load_trace

    folder = Path(__file__).resolve().parents[2] / "data" / "runs" / "text-cuda-bs1-fp32"
    if not folder.exists():
        pytest.skip("data/runs/text-cuda-bs1-fp32 is not in this checkout")
    run = load_run(folder)
    fig = flame_figure(flame_tree(load_trace(run.trace_path).events), max_nodes=300).to_dict()
    host, gpu = fig["data"]
    kinds = [c[1] for c in host["customdata"]]
    assert (
        kinds.count("kernel") == 17
    )  # was 0: all folded into (other) at the 1 % share 300 nodes needed
    assert (
        gpu["type"] == "icicle" and gpu["domain"]["y"] == [0, 0.3] and host["domain"]["y"][0] > 0.3
    )
    labels, values, parents = list(gpu["labels"]), decode(gpu["values"]), list(gpu["parents"])
    assert labels[:3] == ["preprocess", "forward", "postprocess"] and values[:3] == [
        4_512,
        500_615,
        38_211,
    ]
    kernels = [i for i, c in enumerate(gpu["customdata"]) if c[1] == "kernel"]
    assert len(kernels) == 14 and sum(values[i] for i in kernels) + 4_512 + 8_258 == 543_338
    widest = max(kernels, key=lambda i: values[i])
    assert labels[widest] == "sm80_xmma_gemm_f32<br>f32_f32f32_f32_tn_<br>n_tilesize32x32x8…"
    assert gpu["customdata"][widest][3] == "27" and parents[widest] == "gpu:forward"
    # every label fits its box at the minimum font wherever the box is wide enough for one short line:
    # 18 characters at 8 px (~5 px each) need 90 px; the three widest kernels get 100-180 px of 620 px
    assert fig["layout"]["uniformtext"] == {"minsize": LABEL_MIN_PX, "mode": "hide"}
    lines = [line for i in kernels for line in labels[i].split("<br>")]
    assert max(len(line) for line in lines) <= GPU_LABEL_CHARS
    assert max(labels[i].count("<br>") + 1 for i in kernels) <= GPU_LABEL_LINES
    wide = [i for i in kernels if values[i] / 543_338 * 620 >= GPU_LABEL_CHARS * 5]
    assert len(wide) == 3
    heading = [a["text"] for a in fig["layout"]["annotations"]]
    assert heading[1] == "GPU work per stage: kernels and copies (width = GPU time, 543 us in all)"
    assert (
        "kernel" in heading[0] and "<br>" in heading[0]
    )  # the kinds legend wraps instead of running off


def test_differential_flame_figure_of_too_few_samples_says_so_instead_of_a_solid_box():
    """A stage of "0 slow and 1 median samples" was drawn as one solid box (issue 40)."""
    from workbench.plots.flame import MIN_STACK_SAMPLES, differential_flame_figure

    tree = [{"id": 0, "parent": -1, "name": "hydrate", "tail": 0.0, "median": 1.0}]
    for slow, median in ((0, 1), (MIN_STACK_SAMPLES - 1, 500)):
        stacks = {
            "tail_set": "slowest_5pct",
            "stages": {
                "hydrate": {"samples": {"slowest_5pct": slow, "median": median}, "tree": tree}
            },
        }
        fig = differential_flame_figure(stacks).to_dict()
        assert fig["data"] == []
        assert fig["layout"]["annotations"][0]["text"] == (
            f"too few sampled stacks in hydrate to compare: {slow} slow and {median} median samples "
            "(at least 20 each)"
        )
