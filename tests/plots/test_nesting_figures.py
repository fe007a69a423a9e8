"""Figures on the pathological traces of the reliability issue: the flame figure and the
request chart use the analysis' one nesting rule and stay fast (50,000 partly
overlapping calls took 102 s in the dashboard; a 1,000,000-deep trace never finished)."""
import time

import numpy as np
import pandas as pd
import pytest
from plots_helpers import decode

from workbench.analysis.flame import flame_tree
from workbench.plots.flame import fit_tree, flame_figure, trace_flame_figure
from workbench.plots.request_chart import request_flame_chart
from workbench.trace.schema import COLUMNS, KIND_DTYPE


def host_events(ts_ns, dur_ns, names) -> pd.DataFrame:
    """cpu_op rows on one thread, built straight from arrays (no JSON round trip)."""
    n = len(ts_ns)
    text = (lambda values: pd.Categorical(values, categories=pd.Index(sorted(set(values)), dtype="str")))
    data = {"ts_ns": np.asarray(ts_ns, np.int64), "dur_ns": np.asarray(dur_ns, np.int64),
            "name": text(list(names)), "cat": text(["cpu_op"] * n),
            "kind": pd.Categorical(["cpu_op"] * n, dtype=KIND_DTYPE), "pid": text(["1"] * n), "tid": text(["1"] * n)}
    none = np.zeros(n, np.int64)
    data |= {c: pd.arrays.IntegerArray(none, np.ones(n, bool)) for c in ("device", "stream", "correlation", "bytes", "ext_id")}
    return pd.DataFrame(data, columns=list(COLUMNS))


def reference_s() -> float:
    """Seconds this machine takes right now for a fixed linear workload (a 1e6-step Python
    loop and a 1e6-element sort): time limits below are multiples of it, so a busy
    machine (CI, a shared laptop) loosens them while a quadratic walk still fails."""
    start = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i
    np.sort(np.random.default_rng(0).integers(0, 1 << 40, 1_000_000))
    return time.perf_counter() - start


def within(elapsed: float, before: float, multiple: float) -> bool:
    """Was ``elapsed`` at most ``multiple`` reference workloads (the slower of before and after)?"""
    return elapsed <= multiple * max(before, reference_s())


def test_chart_and_flame_tree_agree_on_a_partly_overlapping_call():
    k = 1_000
    events = host_events([0, 10 * k, 50 * k], [100 * k, 50 * k, 30 * k], ["outer", "first", "overlapping"])
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
    assert sum(len(t["y"]) for t in chart["data"]) == 3_000 and set(chart["data"][0]["y"]) == {"thread 1 · 0"}
    assert within(elapsed, before, 100), f"{elapsed:.1f} s"  # ~5 refs when quiet; was 102 s


@pytest.fixture(scope="module")
def deep_tree():
    n = 1_000_000
    ts = np.arange(n, dtype=np.int64)
    return flame_tree(host_events(ts, 2 * (n - ts), ["f"] * n))


def test_a_million_deep_flame_tree_is_cut_to_fit(deep_tree):
    before = reference_s()
    start = time.perf_counter()
    shown, share = fit_tree(deep_tree, 2_000)
    fig = flame_figure(deep_tree, max_nodes=2_000).to_dict()
    elapsed = time.perf_counter() - start
    # at the largest share (10 %) 900,001 nodes remain: the deepest levels are cut to 2,000 nodes
    assert share == 0.1 and len(shown) == 2_000 and int(shown["depth"].max()) == 1_999
    assert len(fig["data"][0]["ids"]) == 2_000
    assert fig["layout"]["title"]["text"] == ("Flame graph (1000000 nodes; under 10% of the total folded into "
                                              "(other); deepest levels not drawn)")
    assert within(elapsed, before, 300), f"{elapsed:.1f} s"  # ~40 refs when quiet
