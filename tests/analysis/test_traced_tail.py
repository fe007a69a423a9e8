"""The slowest traced requests against the median ones, on a built trace with known figures."""

from __future__ import annotations

import pandas as pd

from tests.support.synthetic import TraceBuilder
from workbench.analysis.traced_tail import (
    request_slice,
    request_windows,
    slow_minus_median,
    tail_views,
    traced_sets,
    views_sentence,
)
from workbench.runner import DEFAULT_TRACED
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


def launching_requests(tmp_path, durs=DURS):
    """One ProfilerStep per request every 100 us; request i launches i + 1 kernels (4 us call, 10 us kernel
    starting 2 us after the call ends); the slowest also copies 1 MB host to device (20 us)."""
    b, corr = TraceBuilder(), 1
    slowest = max(range(len(durs)), key=lambda i: (durs[i], -i))
    for i, d in enumerate(durs):
        base = i * 100 * K
        b.annotation(f"ProfilerStep#{i}", base, 100 * K)
        b.stage("forward", base + 1 * K, d * K)
        for j in range(min(i + 1, 3)):
            call = base + 2 * K + j * 5 * K
            b.runtime("cudaLaunchKernel", call, 4 * K, correlation=corr)
            b.kernel("gemm", call + 6 * K, 10 * K, correlation=corr)
            corr += 1
        if i == slowest:
            b.runtime("cudaMemcpyAsync", base + 20 * K, 3 * K, correlation=corr)
            b.memcpy(
                "Memcpy HtoD (Pageable -> Device)", base + 24 * K, 20 * K, corr, nbytes=1 << 20
            )
            corr += 1
    return load_trace(b.write(tmp_path / "t.json"))


def test_tail_views_split_launches_and_copies(tmp_path):
    out = tail_views(launching_requests(tmp_path))
    assert (out["requests"], out["slowest"], out["median"]) == (5, [4], [2])
    assert "rests on 5 traced requests: the slowest 1 against the median 1" in out["note"]
    slow, median = out["slowest_view"], out["median_view"]
    # the slowest (step 4) launches 3 kernels and copies 1 MB; the median (step 2) launches 3, copies nothing
    assert slow["launches"]["count"] == 3 and slow["launches"]["total_ns"] == 12 * K
    # HTA's pairs count the copy's cudaMemcpyAsync too: 3 kernels + 1 copy, delays 2 us x 3 + 1 us
    assert (
        slow["launch_pairs"]["count"] == 4 and slow["launch_pairs"]["gpu_dur_ns"] == (30 + 20) * K
    )
    assert slow["launch_pairs"]["launch_delay_ns"] == 3 * 2 * K + 1 * K
    assert median["launch_pairs"]["count"] == 3 and median["launch_pairs"]["gpu_dur_ns"] == 30 * K
    assert slow["copies"] == {"count": 1, "total_ns": 20 * K, "bytes": 1 << 20}
    htod = next(r for r in slow["directions"] if r["direction"] == "HtoD")
    assert (htod["count"], htod["total_ns"], htod["bytes"]) == (1, 20 * K, 1 << 20)
    assert median["copies"] == {"count": 0, "total_ns": 0, "bytes": None}
    assert median["launches"]["count"] == 3 and median["per_request"]["copy_count"] == 0


def test_tail_views_per_request_over_sets_of_different_sizes(tmp_path):
    # 20 requests: slowest ceil(5 % of 20) = 1, median p40-p60 = 4; request i launches min(i + 1, 3) kernels
    durs = [20 + i for i in range(20)]
    out = tail_views(launching_requests(tmp_path, durs))
    assert (len(out["slowest"]), len(out["median"])) == (1, 4) and out["slowest"] == [19]
    assert out["median"] == [8, 9, 10, 11]
    median = out["median_view"]
    assert median["requests"] == 4 and median["launches"]["count"] == 12
    assert median["per_request"] == {
        "launch_count": 3.0,
        "launch_ns": 12_000.0,
        "gpu_ns": 30_000.0,
        "launch_delay_ns": 6_000.0,
        "copy_count": 0.0,
        "copy_ns": 0.0,
        "copy_bytes": None,
    }
    assert out["slowest_view"]["per_request"]["copy_bytes"] == float(1 << 20)


def test_request_slice_keeps_only_its_requests_and_their_gpu_work(tmp_path):
    part = request_slice(launching_requests(tmp_path), [0, 4])
    names = part.events["name"].astype(str)
    assert sorted(set(names[names.str.startswith("ProfilerStep")])) == [
        "ProfilerStep#0",
        "ProfilerStep#4",
    ]
    assert int((names == "gemm").sum()) == 1 + 3 and int((names == "cudaLaunchKernel").sum()) == 4


def test_default_traced_count_is_the_slowest_3_against_the_median_10():
    windows = pd.DataFrame(
        {
            "step": range(DEFAULT_TRACED),
            "ts_ns": 0,
            "end_ns": 0,
            "stage_ns": [(i * 7919) % 1009 for i in range(DEFAULT_TRACED)],
        }
    )
    sets = traced_sets(windows)
    assert (sets["requests"], len(sets["slowest"]), len(sets["median"])) == (50, 3, 10)


def test_no_steps_no_tail_views(tmp_path):
    b = TraceBuilder().stage("forward", 0, 10 * K)
    out = tail_views(load_trace(b.write(tmp_path / "t.json")))
    assert out["requests"] == 0 and out["slowest_view"] is None and out["median_view"] is None


def test_views_sentence_compares_per_request_and_says_nothing_without_gpu_work(tmp_path):
    out = tail_views(launching_requests(tmp_path))
    assert views_sentence(out) == (
        "per traced request, slowest 1 against median 1: 3.0 against 3.0 launch calls (50.0 against 30.0 us of "
        "GPU work), 1.0 against 0.0 copies (1.05 MB against 0 B)"
    )
    cpu_only = tail_views(five_requests(tmp_path))
    assert cpu_only["slowest_view"]["launches"]["count"] == 0 and views_sentence(cpu_only) is None


def test_two_traced_requests_compare_the_slowest_with_both(tmp_path):
    """p40-p60 of 30 and 50 us holds no request: the median set is the two middle ones (here both)."""
    trace = launching_requests(tmp_path, [30, 50])

    views, tree = tail_views(trace), slow_minus_median(trace)

    assert (views["slowest"], views["median"]) == ([1], [0, 1]) == (tree["slowest"], tree["median"])
    assert views["median_view"]["requests"] == 2
    assert "the slowest 1 against the median 2" in views["note"]
