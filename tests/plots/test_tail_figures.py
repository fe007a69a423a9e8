"""Tail attribution, latency over the run and attribute figures, through fig.to_dict()."""

from __future__ import annotations

import pandas as pd

from plots_helpers import decode

from workbench.analysis.tail import tail_attribution
from workbench.plots.tail import attribute_figure, latency_over_run_figure, tail_figure

MS = 1_000_000


def tables(n=200):
    req = pd.DataFrame(
        {
            "request": range(n),
            "warmup": [i < 2 for i in range(n)],
            "ok": [i != 5 for i in range(n)],
            "dur_ns": [(2 + (i % 7)) * MS for i in range(n)],
            "attr.size": [float(i % 7) for i in range(n)],
        }
    )
    st = pd.DataFrame(
        [
            {"request": i, "stage": s, "dur_ns": d * MS, "device_dur_ns": None}
            for i in range(n)
            for s, d in (("a", 1), ("b", 1 + (i % 7)))
        ]
    ).astype({"device_dur_ns": "Int64"})
    return req, st


def test_tail_figure_stacks_each_stage_share_per_set():
    req, st = tables()
    fig = tail_figure(tail_attribution(req, st, ["a", "b"])).to_dict()
    names = [t["name"] for t in fig["data"]]
    assert names == ["a", "b", "unattributed"]
    assert list(fig["data"][0]["y"]) == [
        "median set (p40-p60)",
        "slowest 5 %",
    ]  # 197 requests: no 1 % row
    assert "slowest 1 % omitted" in fig["layout"]["annotations"][0]["text"]


def test_latency_over_run_marks_warmup_and_failures():
    req, _ = tables()
    fig = latency_over_run_figure(req).to_dict()
    by_name = {t["name"]: t for t in fig["data"]}
    assert set(by_name) == {"measured", "warm-up", "failed"}
    assert (
        decode(by_name["failed"]["customdata"]) == [5] and len(decode(by_name["warm-up"]["x"])) == 2
    )


def test_attribute_figure_plots_stage_time_against_the_attribute():
    req, st = tables()
    fig = attribute_figure(
        req, st, "b", "size", effect={"rho": 1.0, "rho_ci": [0.99, 1.0]}
    ).to_dict()
    assert fig["layout"]["title"]["text"] == "b tracks size: Spearman rho 1.00 [0.99, 1.00]"
    assert len(decode(fig["data"][0]["x"])) == 197
    missing = attribute_figure(req, st, "b", "nope").to_dict()
    assert "no attribute 'nope'" in missing["layout"]["annotations"][0]["text"]


def test_attribute_figure_draws_p50_and_p99_per_value_range_and_the_effect():
    from workbench.analysis.attributes import attribute_effects

    req, st = tables()
    entry = attribute_effects(req, st, ["a", "b"])["b"]["size"]
    fig = attribute_figure(req, st, "b", "size", effect=entry).to_dict()
    assert [t["name"] for t in fig["data"]] == ["b", "p50 per range", "p99 per range"]
    assert list(fig["data"][1]["x"])[:3] == [0.0, 0.0, None]  # 7 values: one range per value
    assert list(fig["data"][1]["y"])[:2] == [1.0, 1.0] and list(fig["data"][1]["y"])[-3:-1] == [
        7.0,
        7.0,
    ]
    assert (
        fig["layout"]["title"]["text"]
        == "b against size: p50 7x from the bottom range to the top, Spearman rho 1.00"
    )


def test_the_tail_figure_has_no_axis_title_where_its_legend_lies():
    """The legend under the plot was drawn over the x axis title (issue 40): the axis' meaning is in the title."""
    req, st = tables()
    layout = tail_figure(tail_attribution(req, st, ["a", "b"])).to_dict()["layout"]
    assert layout["legend"]["y"] < 0 and "title" not in layout["xaxis"]
    assert layout["title"]["text"] == "Where the tail's time goes (share of each set's time)"
