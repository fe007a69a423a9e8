"""Figures on the pathological traces of the reliability issue: the flame figure and the
request chart use the analysis' one nesting rule and stay fast (50,000 partly
overlapping calls took 102 s in the dashboard; a 1,000,000-deep trace never finished)."""

import time

import numpy as np
import pytest
from plots_helpers import decode

from workbench.analysis.flame import flame_tree
from workbench.plots.flame import fit_tree, flame_figure, trace_flame_figure
from workbench.plots.timeline import request_flame_chart
from tests.nesting_helpers import host_events, reference_s, within


def test_chart_and_flame_tree_agree_on_a_partly_overlapping_call():
    k = 1_000
    events = host_events(
        [0, 10 * k, 50 * k], [100 * k, 50 * k, 30 * k], ["outer", "first", "overlapping"]
    )
    bars = {t["name"]: t for t in request_flame_chart(events).to_dict()["data"]}["CPU op"]
    lane_of = dict(zip(decode(bars["base"]), bars["y"]))
    tree = flame_tree(events).set_index("name")
    assert lane_of[0.05] == "thread 1 · 1" == f"thread 1 · {tree.loc['overlapping', 'depth']}"
    assert lane_of[0.01] == "thread 1 · 1" and lane_of[0.0] == "thread 1 · 0"


def test_50000_partly_overlapping_calls_draw_fast():
    n = 50_000
    events = host_events(np.arange(n, dtype=np.int64) * 10_000, np.full(n, 15_000), ["op"] * n)
    before = reference_s()
    start = time.perf_counter()
    flame = trace_flame_figure(events).to_dict()
    chart = request_flame_chart(events, max_bars=3_000).to_dict()
    elapsed = time.perf_counter() - start
    assert list(flame["data"][0]["labels"]) == ["op"]
    assert sum(len(t["y"]) for t in chart["data"]) == 3_000 and set(chart["data"][0]["y"]) == {
        "thread 1 · 0"
    }
    assert within(elapsed, before, 100), f"{elapsed:.1f} s"  # ~5 refs when quiet; was 102 s


@pytest.fixture(scope="module")
def deep_tree():
    n = 1_000_000
    ts = np.arange(n, dtype=np.int64)
    return flame_tree(host_events(ts, 2 * (n - ts), ["f"] * n))


def test_a_million_deep_flame_tree_is_cut_to_fit(deep_tree):
    before = reference_s()
    start = time.perf_counter()
    shown, share, _ = fit_tree(deep_tree, 2_000)
    fig = flame_figure(deep_tree, max_nodes=2_000).to_dict()
    elapsed = time.perf_counter() - start
    # at the largest share (10 %) 900,001 nodes remain: the deepest levels are cut to 2,000 nodes
    assert share == 0.1 and len(shown) == 2_000 and int(shown["depth"].max()) == 1_999
    assert len(fig["data"][0]["ids"]) == 2_000
    assert fig["layout"]["title"]["text"] == (
        "Flame graph (1000000 nodes; under 10% of the total folded into "
        "(other); deepest levels not drawn)"
    )
    assert within(elapsed, before, 300), f"{elapsed:.1f} s"  # ~40 refs when quiet
