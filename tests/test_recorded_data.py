"""The recorded example data in data/: it loads, and the GPU traces give sensible figures on a CPU."""

from pathlib import Path

import pytest

from workbench import load_run
from workbench.analysis.budget import budget
from workbench.analysis.trace_report import analyze

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
GPU_RUNS = sorted(RUNS.glob("*-cuda-*"))
CPU_RUNS = sorted(RUNS.glob("*-cpu-*"))


def test_there_is_recorded_data():
    assert len(CPU_RUNS) >= 8 and len(GPU_RUNS) >= 8


@pytest.mark.parametrize("path", CPU_RUNS + GPU_RUNS, ids=lambda p: p.name)
def test_every_run_loads_and_has_a_budget(path):
    run = load_run(path)
    report = budget(run)
    recorded = (
        30 if run.meta.config.batch_size >= 1024 else 100
    )  # batch 1024 runs record 30 requests (notebooks 3, 4)
    assert report["end_to_end"]["count"] >= recorded and sum(report["errors"].values()) == 0
    assert run.trace_path is not None and run.trace_path.stat().st_size < 5 * 2**20
    assert ("device" in report["stages"][0]) == path.name.split("-")[1].startswith("cuda")


@pytest.mark.parametrize("path", GPU_RUNS, ids=lambda p: p.name)
def test_gpu_traces_give_kernels_launches_copies_and_idle_time(path):
    report = analyze(load_run(path).trace_path)
    assert report["kernels"]["count"] > 0 and report["launches"]["count"] > 0
    assert (
        report["launch_pairs"]["count"] > 0
    )  # HTA's narrow set: cuLaunchKernel (bf16 attention) is not in it
    assert 0 < report["gpu"]["idle_fraction"] < 1
    host_memory = "Pageable" if path.name.endswith("-pageable") else "Pinned"
    htod = report["memcpy"]["by_kind_and_host_memory"][f"HtoD {host_memory}"]
    assert htod["count"] > 0 and htod["bytes"] > 0
    stages = {s["stage"]: s for s in report["stages"]}
    assert stages["forward"]["kernel_count"] > 0 and stages["forward"]["gpu_us"] > 0
    assert stages["preprocess"]["transfer_bytes"] > 0


def test_pinned_copies_are_faster_than_pageable_in_the_recorded_pair():
    def htod(name, memory):
        rep = analyze(load_run(RUNS / name).trace_path)
        return rep["memcpy"]["by_kind_and_host_memory"][f"HtoD {memory}"]["gb_per_s"]

    assert htod("image-cuda-bs64-fp32", "Pinned") > 2 * htod(
        "image-cuda-bs64-fp32-pageable", "Pageable"
    )


def test_small_batch_text_forward_is_launch_bound_on_the_gpu():
    report = analyze(load_run(RUNS / "text-cuda-bs1-fp32").trace_path)
    forward = next(s for s in report["stages"] if s["stage"] == "forward")
    assert forward["launch_bound"] and report["gpu"]["idle_fraction"] > 0.5


def _stage_p50s(name):
    """``{stage: (host p50 ms, CUDA-event p50 ms)}`` of a recorded GPU run, rounded to the microsecond."""
    from workbench import stage_summary

    table = stage_summary(load_run(RUNS / name)).set_index("name")
    return {
        stage: (round(row["p50_ms"], 3), round(row["device_p50_ms"], 3))
        for stage, row in table.iterrows()
    }


def _forward(name):
    return next(
        s for s in analyze(load_run(RUNS / name).trace_path)["stages"] if s["stage"] == "forward"
    )


def test_batch_1024_text_forward_is_compute_bound_on_the_gpu():
    """Notebook 4: about the same kernels as at batch 1 (three traced requests each), now each longer than its launch:
    the forward's kernels run 2.94x its host time at batch 1024 (the GPU works on after the launches end) against
    0.085x at batch 1 (the GPU waits for them). Both sums are over the traced requests' forward ranges."""
    small, large = _forward("text-cuda-bs1-fp32"), _forward("text-cuda-bs1024-fp32")
    assert small["launch_bound"] and not large["launch_bound"]
    assert small["kernel_count"] == 138 and large["kernel_count"] == 132  # 3 traced requests each
    assert round(large["gpu_us"] / large["host_us"], 2) == 2.94
    assert round(small["gpu_us"] / small["host_us"], 3) == 0.085


def test_cuda_graph_replays_the_forward_with_one_launch_per_request():
    """Notebook 4: the graph run launches each traced request's 46 kernels with one cudaGraphLaunch; the forward's
    p50 falls from 0.938 to 0.258 ms and the end to end from 1.419 to 0.719 ms (H100, same session)."""
    eager, graph = _forward("text-cuda-bs1-fp32"), _forward("text-cuda-bs1-fp32-graph")
    assert (
        eager["launch_count"] == 138 and graph["launch_count"] == 3 and graph["kernel_count"] == 138
    )
    assert eager["launch_bound"] and not graph["launch_bound"]
    before, after = _stage_p50s("text-cuda-bs1-fp32"), _stage_p50s("text-cuda-bs1-fp32-graph")
    assert (before["forward"][0], after["forward"][0]) == (0.938, 0.258)
    assert (before["end_to_end"][0], after["end_to_end"][0]) == (1.419, 0.719)


def test_sync_request_run_charges_the_forward_to_postprocess():
    """Notebook 3: with one synchronize per request the host timer sees forward's launches (1.353 ms) and charges
    its GPU work to postprocess (8.003 ms); CUDA events still give 6.661 and 2.692 ms, as the per-stage sync does."""
    wrong, right = (
        _stage_p50s("text-cuda-bs1024-fp32-sync-request"),
        _stage_p50s("text-cuda-bs1024-fp32"),
    )
    assert wrong["forward"] == (1.353, 6.661) and wrong["postprocess"] == (8.003, 2.692)
    assert right["forward"] == (6.731, 6.703) and right["postprocess"] == (3.334, 3.282)


def test_no_recorded_file_carries_a_path_of_the_machine_that_recorded_it():
    """Sampled frames used to keep /work/... and .venv/.../site-packages paths (now
    ``workbench.wait_classes.portable_file``); a run folder names its files relative to itself."""
    import re

    absolute = re.compile(r'"(/(?:work|root|home|tmp|Users|opt|usr)/[^"]*)"')
    found = {
        str(p.relative_to(RUNS.parents[1])): m.group(1)
        for p in sorted(RUNS.parent.rglob("*.json"))
        for m in [absolute.search(p.read_text(errors="replace"))]
        if m
    }
    assert found == {}
