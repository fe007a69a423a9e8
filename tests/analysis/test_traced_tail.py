"""The slowest traced requests against the median ones, on a built trace with known figures."""

from __future__ import annotations

from tests.support.synthetic import TraceBuilder
from workbench.analysis.traced_tail import request_windows, slow_minus_median, traced_sets
from workbench.trace import load_trace

K = 1_000
DURS = [20, 30, 40, 50, 90]  # forward per traced request, us


def five_requests(tmp_path):
    """ProfilerStep#0..4 every 100 us; forward holds aten::mm (10 us shorter); the slowest also aten::heavy 5 us."""
    b = TraceBuilder()
    for i, d in enumerate(DURS):
        base = i * 100 * K
        b.annotation(f"ProfilerStep#{i}", base, 100 * K)
        b.stage("forward", base + 1 * K, d * K)
        b.op("aten::mm", base + 2 * K, (d - 10) * K)
        if i == 4:
            b.op("aten::heavy", base + 83 * K, 5 * K)
    return load_trace(b.write(tmp_path / "t.json"))


def test_request_windows_and_sets(tmp_path):
    events = five_requests(tmp_path).events
    windows = request_windows(events)
    assert windows["step"].tolist() == [0, 1, 2, 3, 4] and windows["stage_ns"].tolist() == [
        d * K for d in DURS
    ]
    sets = traced_sets(windows)
    # slowest: ceil(5 % of 5) = 1 request; median: between p40 (36 us) and p60 (44 us): the 40 us one
    assert (sets["requests"], sets["slowest"], sets["median"]) == (5, [4], [2])
    assert sets["note"].startswith(
        "the slow-request view rests on 5 traced requests: the slowest 1 against the median 1"
    )


def test_slow_minus_median_tree_per_request(tmp_path):
    out = slow_minus_median(five_requests(tmp_path))
    rows = {r["name"]: r for r in out["tree"]}
    assert (
        rows["forward"]["slow_ns"],
        rows["forward"]["median_ns"],
        rows["forward"]["parent"],
    ) == (90 * K, 40 * K, -1)
    assert (rows["aten::mm"]["slow_ns"], rows["aten::mm"]["median_ns"]) == (80 * K, 30 * K)
    assert (rows["aten::heavy"]["slow_ns"], rows["aten::heavy"]["median_ns"]) == (5 * K, 0)
    assert rows["aten::heavy"]["parent"] == rows["forward"]["id"]


def test_no_steps_no_view(tmp_path):
    b = TraceBuilder().stage("forward", 0, 10 * K)
    out = slow_minus_median(load_trace(b.write(tmp_path / "t.json")))
    assert out["requests"] == 0 and out["tree"] == [] and "no traced request" in out["note"]
