"""The continuous batching figure, through ``fig.to_dict()``."""

import pandas as pd
import pytest
from plots_helpers import decode

from workbench.errors import ConfigError
from workbench.plots import generative_figure

CURVE = pd.DataFrame(
    {
        "rate_rps": [10.0, 20.0, 40.0],
        "throughput_rps": [9.5, 19.0, 30.0],
        "ttft_p99_ms": [5.0, 8.0, 90.0],
        "itl_p99_ms": [1.0, 1.5, 2.5],
        "goodput": [1.0, 0.95, 0.4],
    }
)
MEASURED = CURVE.iloc[[0, 2]].assign(ttft_p99_ms=[7.0, 120.0], precision="fp32")


def test_three_panels_of_simulated_measured_and_this_setting():
    current = CURVE.iloc[1].to_dict()
    fig = generative_figure(
        CURVE, measured=MEASURED, current=current, bounds={"ttft_ms": 50, "tpot_ms": 5}
    ).to_dict()
    traces = fig["data"]
    assert [t["name"] for t in traces] == ["simulated", "measured", "this setting"] * 3
    assert [t.get("showlegend") for t in traces] == [True] * 3 + [False] * 6
    assert [t["xaxis"] for t in traces] == ["x"] * 3 + ["x2"] * 3 + ["x3"] * 3
    simulated, measured, star = traces[0], traces[1], traces[2]
    assert decode(simulated["x"]) == [9.5, 19.0, 30.0]
    assert decode(simulated["y"]) == [5.0, 8.0, 90.0]
    assert decode(simulated["customdata"]) == [10.0, 20.0, 40.0]
    assert decode(measured["x"]) == [9.5, 30.0] and decode(measured["y"]) == [7.0, 120.0]
    assert (decode(star["x"]), decode(star["y"])) == ([19.0], [8.0])
    assert decode(traces[4]["y"]) == [1.0, 2.5]  # ITL panel, measured
    assert decode(traces[6]["y"]) == [1.0, 0.95, 0.4]  # goodput panel, simulated
    assert fig["layout"]["yaxis3"]["range"] == [0, 1.05]
    (bound,) = fig["layout"]["shapes"]
    assert (bound["y0"], bound["y1"], bound["yref"]) == (50, 50, "y")
    assert fig["layout"]["title"]["text"] == (
        "Continuous batching, simulated from measured steps"
        "<br>goodput: TTFT <= 50 ms and TPOT <= 5 ms"
    )
    titles = [fig["layout"][f"yaxis{k}"]["title"]["text"] for k in ("", "2", "3")]
    assert titles == ["TTFT p99 (ms)", "ITL p99 (ms)", "goodput"]
    assert "annotations" not in fig["layout"]  # nothing under the legend's row


def test_the_curve_alone_draws_only_the_simulated_traces():
    fig = generative_figure(CURVE, measured=MEASURED.iloc[:0]).to_dict()
    assert [t["name"] for t in fig["data"]] == ["simulated"] * 3
    assert "shapes" not in fig["layout"] or not fig["layout"]["shapes"]


def test_an_empty_curve_says_so_and_a_wrong_table_is_named():
    fig = generative_figure(CURVE.iloc[:0]).to_dict()
    assert fig["layout"]["annotations"][0]["text"] == "no rate simulated"
    with pytest.raises(ConfigError, match=r"missing columns \['goodput'\]"):
        generative_figure(CURVE.drop(columns="goodput"))
