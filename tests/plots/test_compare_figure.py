import math

import pytest
from plots_helpers import decode, make_run, summary_of

from workbench.errors import ConfigError
from workbench.plots import compare_figure
from workbench.plots.compare_figures import compare_table


def summaries():
    a = make_run({"parse": [1_000_000] * 10, "model": [4_000_000] * 10}, glue_ns=0)
    b = make_run(
        {"parse": [1_000_000] * 10, "model": [3_000_000] * 10, "post": [500_000] * 10}, glue_ns=0
    )
    return summary_of(*a, ["parse", "model"]), summary_of(*b, ["parse", "model", "post"])


def test_deltas_are_b_minus_a_per_stage():
    a, b = summaries()
    fig = compare_figure(a, b, labels=("fp32", "bf16")).to_dict()
    names = [t["name"] for t in fig["data"]]
    assert names == ["fp32", "bf16", "Δ p50", "Δ p95", "Δ p99"]
    x = list(fig["data"][0]["x"])
    assert x == ["parse", "model", "unattributed", "end_to_end", "post"]
    assert decode(fig["data"][0]["y"])[:4] == [1.0, 4.0, 0.0, 5.0]
    assert decode(fig["data"][1]["y"]) == [1.0, 3.0, 0.0, 4.5, 0.5]
    delta = decode(fig["data"][4]["y"])
    assert delta[:4] == [0.0, -1.0, 0.0, -0.5] and math.isnan(delta[4])
    assert list(fig["data"][4]["text"])[:2] == ["+0.0%", "-25.0%"]
    assert fig["layout"]["title"]["text"] == "fp32 vs bf16: end-to-end p99 5.00 -> 4.50 ms (-10.0%)"


def test_compare_table_columns():
    a, b = summaries()
    table = compare_table(a, b)
    assert table.loc[table["name"] == "model", "mean_ms_delta"].item() == -1.0
    assert {"p99_ms_a", "p99_ms_b", "p99_ms_delta"} <= set(table.columns)


def test_bad_summary_is_refused():
    a, b = summaries()
    with pytest.raises(ConfigError, match="summary_b: missing columns"):
        compare_figure(a, b.drop(columns=["share"]))


def compare_result():
    entry = {
        "name": "forward",
        "p50_ratio": 1.1,
        "p50_ci": [1.05, 1.2],
        "p99_ratio": 1.3,
        "p99_ci": [0.9, 1.9],
        "verdict": "slower",
    }
    e2e = {
        "name": "end_to_end",
        "p50_ratio": 1.0,
        "p50_ci": [0.98, 1.01],
        "p99_ratio": None,
        "p99_ci": [None, None],
        "verdict": "no detectable difference",
    }
    return {
        "kind": "interleaved",
        "configs": [{"label": "fp32"}, {"label": "bf16"}],
        "min_effect": 0.02,
        "stages": [entry],
        "end_to_end": e2e,
    }


def test_ratio_figure_draws_each_interval_and_the_no_effect_band():
    from workbench.plots.compare_figures import VERDICT_COLORS, ratio_figure

    fig = ratio_figure(compare_result()).to_dict()
    (trace,) = fig["data"]
    assert trace["name"] == "bf16 / fp32" and list(trace["x"]) == ["forward", "end to end"]
    assert decode(trace["y"]) == [1.1, 1.0]
    assert decode(trace["error_y"]["array"]) == pytest.approx([0.1, 0.01])
    assert decode(trace["error_y"]["arrayminus"]) == pytest.approx([0.05, 0.02])
    assert list(trace["marker"]["color"]) == [
        VERDICT_COLORS["slower"],
        VERDICT_COLORS["no detectable difference"],
    ]
    band = [s for s in fig["layout"]["shapes"] if s["type"] == "rect"][0]
    assert (band["y0"], band["y1"]) == (0.98, 1.02)
    assert fig["layout"]["title"]["text"] == "p50 ratio per stage, interleaved, with intervals"
    p99 = ratio_figure(compare_result(), metric="p99").to_dict()["data"][0]
    assert decode(p99["y"])[0] == 1.3 and math.isnan(decode(p99["y"])[1])


def test_ratio_figure_without_comparisons_says_so():
    from workbench.plots.compare_figures import ratio_figure

    fig = ratio_figure({"configs": [], "stages": [], "end_to_end": None}).to_dict()
    assert "nothing was compared" in str(fig["layout"])


def test_change_labels_stand_upright_so_neighbours_never_run_together():
    """Level labels of three small neighbouring bars read "+475.9%+426.0%+366.3%" at 1280 px (issue 40)."""
    a, b = summaries()
    fig = compare_figure(a, b).to_dict()
    assert [t.get("textangle") for t in fig["data"][2:]] == [-90, -90, -90]
    assert fig["layout"]["uniformtext"] == {
        "minsize": 10,
        "mode": "hide",
    }  # never shrunk under 10 px
