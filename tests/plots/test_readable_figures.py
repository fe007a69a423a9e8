"""Figures a student can read (issue 30), checked through ``fig.to_dict()``.

Log axes labelled at whole decades only; zero launch delays counted, not drawn at
0.001 us; a colour bar on the launch heatmap; percentile values in the legend, not
written over the bars; the pinned and pageable copies on shared axes, and "pin it"
only where pageable copies matter; flame labels never below 10 px.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from plots_helpers import decode

from tests.support.synthetic import TraceBuilder
from workbench.plots import flame_figure, launch_figure
from workbench.plots.style import log_axis, positive_extent
from workbench.plots.transfers import transfer_comparison_figure, transfer_figure
from workbench.trace import Trace, load_events


@pytest.mark.parametrize(
    "lo, hi, expected",
    [
        (12.0, 133.0, [1, 3]),
        (0.2, 0.9, [-1, 0]),
        (1.0, 10.0, [0, 1]),
        (5.0, 5.0, [0, 2]),
        (0.0, 0.0, [0, 1]),
    ],
)
def test_log_axis_covers_whole_decades_with_at_least_two_labels(lo, hi, expected):
    axis = log_axis(lo, hi, "ms")
    assert axis["range"] == expected and axis["dtick"] == 1 and axis["ticksuffix"] == " ms"
    assert axis["minor"] == dict(ticks="", showgrid=True, gridcolor="#f2f2f2")


def test_positive_extent_ignores_zero_nan_and_infinity():
    assert positive_extent(np.array([0.0, 3.0, np.nan]), [np.inf, 0.5]) == (0.5, 3.0)
    assert positive_extent(np.array([0.0])) == (1.0, 10.0)


def launches_with_zero_delays(path) -> Trace:
    """Six launches: three kernels start when their call ends (delay 0), three 2, 20 and 200 us later."""
    b = TraceBuilder()
    b.stage("forward", 0, 2_000_000)
    for i, delay_us in enumerate((0, 0, 0, 2, 20, 200)):
        start = 10_000 + 300_000 * i
        b.runtime("cudaLaunchKernel", start, 5_000, i + 1)
        b.kernel("k", start + 5_000 + delay_us * 1_000, 10_000, i + 1)
    return Trace(load_events(b.write(path / "zero.json")))


def test_zero_launch_delays_are_a_count_not_a_spike_at_a_floor(tmp_path):
    fig = launch_figure(launches_with_zero_delays(tmp_path)).to_dict()
    assert (
        fig["layout"]["annotations"][0]["text"] == "launch delay (3 of 6 zero, not on the log axis)"
    )
    delay = fig["data"][0]
    edges, counts = decode(delay["x"]), decode(delay["y"])[:-1]
    assert sum(counts) == 3 and min(edges) == pytest.approx(
        2.0
    )  # the positive delays only, from 2 us
    axis = fig["layout"]["xaxis"]
    assert (axis["type"], axis["dtick"], axis["range"]) == (
        "log",
        1,
        [0, 3],
    )  # 1 us .. 1000 us, decades only


def test_the_launch_heatmap_has_a_colour_bar_and_percentiles_a_legend(tmp_path):
    fig = launch_figure(launches_with_zero_delays(tmp_path)).to_dict()
    heat = next(t for t in fig["data"] if t["type"] == "heatmap")
    assert heat["showscale"] is True and heat["colorbar"]["title"]["text"] == "launches"
    bars = [t for t in fig["data"] if t["type"] == "bar" and t.get("legendgroup") == "percentiles"]
    assert [t["name"] for t in bars] == ["p50", "p90", "p99"]
    assert all(
        "text" not in t and t.get("showlegend", True) for t in bars
    )  # no text clipped over log bars
    assert fig["layout"]["yaxis3"]["dtick"] == 1 and fig["layout"]["yaxis3"]["ticksuffix"] == " us"


def copies(path, name: str, host_memory: str, htod_ns: int) -> Trace:
    """A 2 MB input copy from ``host_memory`` and a 1 kB pageable result copy (2 us)."""
    b = TraceBuilder()
    b.runtime("cudaMemcpyAsync", 0, 1_000, 1).memcpy(
        f"Memcpy HtoD ({host_memory} -> Device)", 2_000, htod_ns, 1, nbytes=2_000_000
    )
    b.runtime("cudaMemcpyAsync", 200_000, 1_000, 2).memcpy(
        "Memcpy DtoH (Device -> Pageable)", 202_000, 2_000, 2, nbytes=1_000
    )
    return Trace(load_events(b.write(path / f"{name}.json")))


def test_pin_it_only_where_pageable_copies_matter(tmp_path):
    pinned = transfer_figure(copies(tmp_path, "pinned", "Pinned", 60_000)).to_dict()["layout"][
        "title"
    ]["text"]
    assert pinned.endswith(
        ": 3% of copy time from pageable memory (DtoH Pageable)"
    )  # the 1 kB result only
    pageable = transfer_figure(copies(tmp_path, "pageable", "Pageable", 160_000)).to_dict()[
        "layout"
    ]["title"]["text"]
    assert pageable.endswith(
        "100% of copy time from pageable memory (DtoH Pageable, HtoD Pageable) "
        "(pin it to overlap copies)"
    )


def test_pinned_and_pageable_compare_on_shared_axes(tmp_path):
    fig = transfer_comparison_figure(
        {
            "pageable": copies(tmp_path, "a", "Pageable", 160_000),
            "pinned": copies(tmp_path, "b", "Pinned", 60_000),
        }
    ).to_dict()
    assert fig["layout"]["title"]["text"] == "Copies compared: pageable vs pinned"
    by_panel, legend = {}, []
    for t in fig["data"]:
        (legend if list(t["x"]) == [None] else by_panel.setdefault(t["yaxis"], [])).append(t)
    assert sorted(by_panel) == ["y", "y2", "y3"]
    for traces in by_panel.values():  # both runs on the one y axis of each panel
        assert [t["name"] for t in traces] == ["pageable", "pinned"]
        assert all(
            list(t["x"]) == ["DtoH Pageable", "HtoD Pageable", "HtoD Pinned"] for t in traces
        )
    time_ms = {t["name"]: decode(t["y"]) for t in by_panel["y2"]}
    assert time_ms["pageable"][:2] == [0.002, 0.16] and math.isnan(time_ms["pageable"][2])
    assert math.isnan(time_ms["pinned"][1]) and time_ms["pinned"][2] == 0.06
    assert [t.get("showlegend", True) for t in fig["data"]] == [False] * 3 + [True] + [
        False
    ] * 3 + [True]
    assert fig["layout"]["barmode"] == "group"


def test_the_compared_runs_legend_shows_their_patterns_beside_the_panels(tmp_path):
    """The legend sat over the first panel's title, its swatch the first copy class' colour (issue 40)."""
    fig = transfer_comparison_figure(
        {
            "pageable": copies(tmp_path, "a", "Pageable", 160_000),
            "pinned": copies(tmp_path, "b", "Pinned", 60_000),
        }
    ).to_dict()
    shown = [t for t in fig["data"] if t.get("showlegend", True)]
    assert [(t["name"], t["marker"]["pattern"]["shape"], t["marker"]["color"]) for t in shown] == [
        ("pageable", "", "#d9d9d9"),
        ("pinned", "/", "#d9d9d9"),
    ]
    assert [t["offsetgroup"] for t in shown] == [
        "0",
        "1",
    ]  # each in its run's slot, no slot of its own
    drawn = [t["marker"]["color"] for t in fig["data"] if t not in shown]
    assert all(
        isinstance(c, (list, tuple)) and len(c) == 3 for c in drawn
    )  # a colour per copy class
    legend = fig["layout"]["legend"]
    assert (legend["orientation"], legend["x"], legend["xanchor"]) == ("v", 1.02, "left")
    assert {
        a["xaxis"]: a.get("tickangle")
        for a in [fig["layout"][k] | {"xaxis": k} for k in ("xaxis", "xaxis2", "xaxis3")]
    } == {"xaxis": -90, "xaxis2": -90, "xaxis3": -90}


def test_flame_labels_never_shrink_below_ten_pixels(trace_events):
    from workbench.analysis.flame import flame_tree

    layout = flame_figure(flame_tree(trace_events)).to_dict()["layout"]
    assert layout["uniformtext"] == {"minsize": 10, "mode": "hide"}


PERCENTILE_TEXT = re.compile(r"\bp(50|90|95|99)\b")


def _texts_written_on_the_plot(fig: dict) -> list[str]:
    """Annotation texts and every text a trace writes on the plot (bar/scatter ``text`` shown as text)."""
    out = [a.get("text") or "" for a in fig["layout"].get("annotations", [])]
    for t in fig["data"]:
        shown = t.get("type") == "bar" or "text" in (t.get("mode") or "")
        if shown and t.get("text") is not None:
            out += [str(x) for x in np.atleast_1d(t["text"])]
    return out


def _percentile_figures(toy_run):
    from types import SimpleNamespace

    from workbench.analysis.attributes import attribute_effects
    from workbench.analysis.budget import percentile_request_parts, stage_summary
    from workbench.analysis.tail import tail_attribution
    from workbench.plots import budget_figure, distribution_figure
    from workbench.plots.tail import attribute_figure, latency_over_run_figure, tail_figure

    requests, stages, order = toy_run
    run = SimpleNamespace(requests=requests, stages=stages, stage_names=order)
    summary = stage_summary(run)
    attr = requests.assign(**{"attr.size": [float(i % 7) for i in range(len(requests))]})
    effect = attribute_effects(attr, stages, order)["post"]["size"]
    return {
        "histogram": distribution_figure(requests, stages, order, stage="parse"),
        "cdf": distribution_figure(requests, stages, order, stage="parse", kind="cdf"),
        "budget": budget_figure(summary),
        "budget requests": budget_figure(
            summary, mode="requests", at=percentile_request_parts(run)
        ),
        "tail": tail_figure(tail_attribution(requests, stages, order)),
        "over the run": latency_over_run_figure(requests, picked=50),
        "attribute": attribute_figure(attr, stages, "post", "size", effect=effect),
    }


def test_no_figure_writes_a_percentile_beside_its_marker(toy_run):
    """p50/p95/p99 written beside their lines overprinted each other and the curve and were clipped at the edge
    (".54 ms"); every percentile is a named trace in the legend instead, never text on the plot."""
    for name, fig in _percentile_figures(toy_run).items():
        d = fig.to_dict()
        written = [t for t in _texts_written_on_the_plot(d) if PERCENTILE_TEXT.search(t)]
        assert written == [], (name, written)
        named = [t for t in d["data"] if PERCENTILE_TEXT.match(t.get("name") or "")]
        assert all(t.get("showlegend", True) is not False for t in named), name
    legend = [t["name"] for t in _percentile_figures(toy_run)["histogram"].to_dict()["data"]][-3:]
    assert legend == ["p50 0.0505 ms", "p95 0.095 ms", "p99 0.099 ms"]


def test_the_tail_headline_wraps_and_never_splits_a_percent_sign():
    """The tail figure's headline and notes ran past a 640 px figure as one line at y=1.12."""
    from workbench.plots.tail import NOTE_CHARS, tail_figure

    tail = {
        "stages": [{"name": "a"}],
        "sets": {"median": {"shares": {"a": 1.0}}},
        "headline": "in the slowest 5 %, forward holds 88% of the time; in the median request, 80%",
        "notes": [
            "slowest 1 % omitted: 197 requests; it needs at least 200 (with fewer it is 2 request(s), "
            "not a tail)"
        ],
    }
    d = tail_figure(tail).to_dict()
    note = d["layout"]["annotations"][0]
    lines = note["text"].split("<br>")
    assert len(lines) == 4 and max(map(len, lines)) <= NOTE_CHARS == 75
    assert lines == [
        "in the slowest 5 %, forward holds 88% of the time; in the median request,",
        "80%",
        "slowest 1 % omitted: 197 requests; it needs at least 200 (with fewer it is",
        "2 request(s), not a tail)",
    ]
    assert all(not line.endswith(" 1") and not line.startswith("%") for line in lines)
    assert (note["yanchor"], note["y"]) == ("bottom", 1.02)
    assert d["layout"]["margin"]["t"] == 60 + 16 * 4


def test_the_smallest_percentile_bar_stands_a_decade_tall_and_the_legend_sits_under_the_panels(
    tmp_path,
):
    """Launch calls of 12 us on an axis from 10 us drew their p50 as a sliver, and the p50/p90/p99 legend sat on
    the delay panel's title (issue 40)."""
    b = TraceBuilder()
    b.stage("forward", 0, 2_000_000)
    for i in range(6):
        start = 10_000 + 300_000 * i
        b.runtime("cudaLaunchKernel", start, 12_000, i + 1)
        b.kernel("k", start + 32_000, 50_000, i + 1)  # a 20 us delay
    fig = launch_figure(Trace(load_events(b.write(tmp_path / "calls.json")))).to_dict()
    bars = [t for t in fig["data"] if t.get("legendgroup") == "percentiles"]
    smallest = min(min(decode(t["y"])) for t in bars)
    assert smallest == 12.0 and fig["layout"]["yaxis3"]["range"] == [0, 2]  # 1 us .. 100 us
    legend = fig["layout"]["legend"]
    assert (legend["y"], legend["yanchor"]) == (
        -0.06,
        "top",
    )  # under the plots, clear of every title
