"""Cold start apart (issue 25 item 6): set-up calls and slow first launches are reported apart,
and the launch verdict is computed over the steady state, never contradicting the launch panel."""

from pathlib import Path

import pytest

from workbench.analysis import launches, trace_report, trace_stages
from workbench.trace import load_trace
from tests.support import tables
from tests.support.synthetic import TraceBuilder

ALEXNET = (
    Path(__file__).resolve().parents[2] / "data" / "traces" / "hta_critical_path_alexnet.json.gz"
)


def cold_trace(path):
    """cudaFree (init, 5 ms), a slow first launch of k1 (2 ms), then 12 steady 5 us launches of 1 us kernels;
    a second cudaDeviceGetStreamPriorityRange in the steady state is not cold start."""
    b = TraceBuilder()
    b.op("aten::empty", 0, 6_000_000)
    b.runtime("cudaFree", 100_000, 5_000_000)
    b.runtime("cudaDeviceGetStreamPriorityRange", 5_200_000, 1_000)
    b.runtime("cudaLaunchKernel", 6_000_000, 2_000_000, 1).kernel("k1", 8_010_000, 1_000, 1)
    for i in range(12):
        at = 8_100_000 + 10_000 * i
        b.runtime("cudaLaunchKernel", at, 5_000, i + 2).kernel(
            "k1" if i % 2 else "k2", at + 6_000, 1_000, i + 2
        )
    b.runtime("cudaDeviceGetStreamPriorityRange", 8_300_000, 1_000)
    return load_trace(b.write(path / "cold.json"))


def test_cold_start_calls_are_set_up_calls_and_slow_first_launches(tmp_path):
    trace = cold_trace(tmp_path)
    cold = tables.cold_start_calls(trace)
    assert cold[["name", "ts_ns", "dur_ns", "reason"]].values.tolist() == [
        ["cudaFree", 100_000, 5_000_000, "init"],
        ["cudaDeviceGetStreamPriorityRange", 5_200_000, 1_000, "init"],
        ["cudaLaunchKernel", 6_000_000, 2_000_000, "first launch"],
    ]
    assert launches.cold_start_summary(trace) == {"calls": 3, "dur_ns": 7_001_000}
    assert (
        len(launches.steady_launch_pairs(trace)) == 12 and len(launches.launch_pairs(trace)) == 13
    )
    assert (
        launches.steady(launches.call_table(trace), trace)["ts_ns"].size == 12
        and launches.steady_gpu_dur_ns(trace) == 12_000
    )
    assert tables.cold_start_calls(trace)["reason"].tolist() == ["init", "init", "first launch"]


def test_the_verdict_is_computed_over_the_steady_state(tmp_path):
    trace = cold_trace(tmp_path)
    # host span 8.3 ms less 7.001 ms of cold start = 1.299 ms; 12 launches of 5 us (60 us), 12 us of GPU work
    assert trace_stages.steady_host_ns(trace) == 8_301_000 - 7_001_000
    bound, sentence = trace_stages.launch_verdict(trace)
    assert bound and sentence == (
        "Launch-bound: 12 launches per step, GPU busy 1% of host time, launch calls 5%, "
        "100% of 12 launches short kernels; cold start set apart (3 calls)"
    )
    report = trace_report.analyze(trace)
    assert report["launches"]["cold_start"] == {"calls": 3, "dur_us": 7001.0}
    assert report["launches"]["count"] == 13  # the launch figures themselves keep every call


def test_alexnet_is_not_launch_bound_once_its_cold_start_is_apart():
    """Before: "Launch-bound: 79 launches per step, GPU busy 0% of host time" because one first launch
    took 3,056 ms and context set-up 36 s of the 43 s host span, beside a panel where 76 % of launches
    were not short kernels."""
    trace = load_trace(ALEXNET)
    report = trace_report.analyze(trace)
    assert report["launches"]["cold_start"] == {"calls": 20, "dur_us": 40_277_551.0}
    assert report["launch_verdict"] == {
        "launch_bound": False,
        "sentence": (
            "Not launch-bound: 78 launches per step, GPU busy 2% of host time, launch calls 0%, "
            "24% of 97 launches short kernels; cold start set apart (20 calls)"
        ),
    }
    slow = tables.cold_start_calls(trace).query("reason == 'first launch'")
    assert slow[["name", "dur_ns"]].values.tolist() == [["cudaLaunchKernel", 3_055_567_000]]


def test_the_alexnet_verdict_agrees_with_the_launch_panel_beside_it():
    pytest.importorskip("plotly")
    from tests.plots.plots_helpers import decode

    from workbench.plots import launch_figure

    trace = load_trace(ALEXNET)
    bound, sentence = trace_stages.launch_verdict(trace)
    fig = launch_figure(trace).to_dict()
    # the title wraps the verdict at 110 characters (issue 40): the same words, broken with <br>
    assert fig["layout"]["title"]["text"].replace("<br>", " ").startswith(sentence)
    short, other = decode(
        next(
            d
            for d in fig["data"]
            if d.get("x") is not None and list(d["x"]) == ["short kernels", "other launches"]
        )["y"]
    )
    assert (short, other) == (23, 74)  # the steady pairs: the same 97 launches as the verdict
    assert bound == (
        short >= other
    )  # the verdict says launch-bound only where short kernels are the majority
