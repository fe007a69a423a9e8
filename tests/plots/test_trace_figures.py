"""Launch, transfer, GPU timeline and step figures from a small exact trace (see plots_helpers.small_trace)."""

import math

import numpy as np
import pandas as pd
import pytest
from plots_helpers import decode

from workbench.plots import (
    gpu_timeline_figure,
    launch_figure,
    step_breakdown_figure,
    transfer_figure,
)
from workbench.analysis.trace_stages import launch_verdict
from workbench.plots.style import KIND_COLORS, NO_GPU_EVENTS
from workbench.plots.timeline import grouped_steps
from workbench.analysis.transfers import copy_classes
from workbench.trace import Trace, load_events
from tests.support.synthetic import TraceBuilder


def annotation(fig) -> str:
    return fig.to_dict()["layout"]["annotations"][0]["text"]


# --- launches ------------------------------------------------------------------------------


def test_launch_figure_numbers(trace_events):
    fig = launch_figure(trace_events).to_dict()
    title = fig["layout"]["title"]["text"]
    assert title.startswith(
        "Not launch-bound: forward (2 launches per call, GPU busy 10% of its host time; launch calls 2%)"
    )
    assert (
        "40% of 5 launches are short kernels; median launch delay 5 us; 0 delays over 100 us"
        in title
    )
    delay, heat, _line, p50, p90, p99, short = fig["data"]
    assert sum(decode(delay["y"])[:-1]) == 5
    assert np.nansum(np.array(decode(heat["z"]), dtype=float)) == 5
    assert list(p50["x"]) == ["launch call", "launch delay", "GPU time"]
    assert decode(p50["y"]) == [
        6.0,
        5.0,
        10.0,
    ]  # medians (us) of cpu 10,5,8,6,4 / delay 5,90,2,4,6 / gpu 5,50,20,10,2
    assert decode(short["y"]) == [2, 3]


def launch_bound_trace(path) -> pd.DataFrame:
    """Stage of 100 us: ten 5 us launch calls, each starting a 1 us kernel."""
    b = TraceBuilder()
    b.stage("forward", 0, 100_000)
    for i in range(10):
        b.runtime("cudaLaunchKernel", 1_000 + 9_000 * i, 5_000, i + 1)
        b.kernel("tiny", 8_000 + 9_000 * i, 1_000, i + 1)
    return load_events(b.write(path / "bound.json"))


def test_launch_bound_verdict_comes_from_the_stage_analysis(tmp_path):
    bound, sentence = launch_verdict(Trace(launch_bound_trace(tmp_path)))
    assert bound
    assert (
        sentence
        == "Launch-bound: forward (10 launches per call, GPU busy 10% of its host time; launch calls 50%)"
    )


def test_launch_verdict_without_stages_uses_the_whole_trace(tmp_path):
    events = launch_bound_trace(tmp_path)
    events = events[~events["name"].astype(str).str.startswith("workbench.stage::")]
    bound, sentence = launch_verdict(Trace(events))
    # host span: first launch call start (1 us) to last end (87 us)
    assert bound and sentence == (
        "Launch-bound: 10 launches per step, GPU busy 12% of host time, launch calls 58%, "
        "100% of 10 launches short kernels"
    )


def test_launch_figure_without_gpu_events(cpu_events):
    assert annotation(launch_figure(cpu_events)) == NO_GPU_EVENTS


# --- transfers -----------------------------------------------------------------------------


def test_transfer_figure_bytes_time_bandwidth(trace_events):
    fig = transfer_figure(trace_events).to_dict()
    bytes_, time_, bw, sync = fig["data"]
    assert list(bytes_["x"]) == ["DtoH Pinned", "HtoD Pageable", "memset"]
    assert decode(bytes_["y"]) == [0.5, 2.0, 0.004096]
    assert decode(time_["y"]) == [0.01, 0.02, 0.002]
    assert decode(bw["y"]) == [50.0, 100.0, 2.048]
    assert list(bytes_["marker"]["color"]) == [
        KIND_COLORS["memcpy_dtoh_pinned"],
        KIND_COLORS["memcpy_htod_pageable"],
        KIND_COLORS["memset"],
    ]
    assert (
        list(sync["x"]) == ["cudaDeviceSynchronize"]
        and decode(sync["y"]) == [0.1]
        and list(sync["text"]) == ["n=1"]
    )
    assert fig["layout"]["title"]["text"].endswith(
        "67% of copy time from pageable memory (HtoD Pageable) (pin it to overlap copies)"
    )


def test_copies_without_a_host_side_keep_their_direction(tmp_path):
    b = TraceBuilder()
    b.runtime("cudaMemcpyAsync", 0, 1_000, 1).memcpy(
        "Memcpy DtoD (Device -> Device)", 2_000, 4_000, 1, nbytes=8_000
    )
    classes = copy_classes(Trace(load_events(b.write(tmp_path / "dtod.json"))))
    assert classes["label"].tolist() == ["DtoD"]
    assert classes["bytes"].tolist() == [8_000] and classes["gb_per_s"].tolist() == [2.0]


def test_transfer_figure_without_gpu_events(cpu_events):
    assert annotation(transfer_figure(cpu_events)) == NO_GPU_EVENTS


# --- GPU timeline and steps ----------------------------------------------------------------


def test_gpu_timeline_busy_and_idle(trace_events):
    fig = gpu_timeline_figure(trace_events, bins=10).to_dict()
    assert fig["layout"]["title"]["text"] == "GPU busy 87 us of a 422 us span (idle 79%)"
    busy, *streams = fig["data"]
    x = decode(busy["x"])
    assert x[0] == 0.0 and math.isclose(x[-1], 0.422) and len(x) == 11
    assert [t["name"] for t in streams] == [
        "busy",
        "idle: host wait",
        "idle: kernel wait (< 30 us)",
        "idle: other",
    ]
    assert list(streams[0]["y"]) == ["GPU 0 stream 7"] and decode(streams[0]["x"]) == [0.087]
    assert sum(decode(t["x"])[0] for t in streams) == pytest.approx(0.422)


def test_gpu_timeline_without_gpu_events(cpu_events):
    assert annotation(gpu_timeline_figure(cpu_events)) == NO_GPU_EVENTS


def test_step_breakdown_bars_sum_to_the_step(trace_events):
    fig = step_breakdown_figure(trace_events).to_dict()
    bars = {t["name"]: decode(t["y"])[0] for t in fig["data"]}
    assert list(bars) == [
        "kernel",
        "memcpy",
        "memset",
        "communication",
        "runtime",
        "data loader",
        "CPU exec",
        "other",
    ]
    assert (bars["kernel"], bars["memcpy"], bars["runtime"], bars["CPU exec"]) == (
        0.055,
        0.03,
        0.133,
        0.67,
    )
    assert sum(bars.values()) == pytest.approx(1.0)
    assert fig["layout"]["title"]["text"].startswith("Step time breakdown: 1 step(s), mean 1 ms")


def test_many_steps_are_averaged_in_groups():
    n = 10
    frame = pd.DataFrame(
        {
            "step": [str(i) for i in range(n)],
            "start_ns": 0,
            "end_ns": 0,
            **{
                c: np.arange(n) * 10
                for c in (
                    "kernel_ns",
                    "memcpy_ns",
                    "memset_ns",
                    "communication_ns",
                    "runtime_ns",
                    "dataloader_ns",
                    "cpu_exec_ns",
                    "other_ns",
                )
            },
            "total_ns": np.arange(n) * 80,
        }
    )
    grouped = grouped_steps(frame, 3)
    assert grouped["step"].tolist() == ["0-3", "4-6", "7-9"]
    assert grouped["kernel_ns"].tolist() == [15.0, 50.0, 80.0]
    assert grouped_steps(frame, 10) is frame
