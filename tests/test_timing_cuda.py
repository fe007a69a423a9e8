"""CUDA timing paths: skipped cleanly without a GPU (see conftest)."""

import pytest

from workbench import Pipeline, PipelineConfig, profile

pytestmark = pytest.mark.cuda


def _sleep_pipeline(cycles: int):
    import itertools

    import torch

    pipe = Pipeline(
        "gpu-sleep", items=lambda: itertools.count(), config=PipelineConfig(device="cuda")
    )
    pipe.add("launch", lambda b: (torch.cuda._sleep(cycles), b)[1])
    pipe.add("host", lambda b: b)
    return pipe


def test_stage_sync_charges_device_time_to_its_own_stage():
    run = profile(_sleep_pipeline(2_000_000), requests=10, warmup=2, traced=0, sync="stage")
    launch = run.stages[(run.stages["stage"] == "launch") & (run.stages["request"] >= 2)]
    host = run.stages[(run.stages["stage"] == "host") & (run.stages["request"] >= 2)]
    assert (launch["device_dur_ns"] > 100_000).all()
    assert (launch["dur_ns"] >= launch["device_dur_ns"] * 0.95).all()
    # the host-only stage pays one event pair and a synchronize, far less than the sleep kernel
    assert host["dur_ns"].median() < launch["dur_ns"].median() / 10


def test_request_sync_shows_host_timer_measures_only_the_launch():
    run = profile(_sleep_pipeline(2_000_000), requests=10, warmup=2, traced=0, sync="request")
    launch = run.stages[(run.stages["stage"] == "launch") & (run.stages["request"] >= 2)]
    assert (launch["dur_ns"] < launch["device_dur_ns"] / 2).all()
    e2e = run.requests[~run.requests["warmup"]]["dur_ns"]
    assert (e2e.to_numpy() >= launch["device_dur_ns"].to_numpy(dtype="int64") * 0.95).all()


def test_cuda_trace_has_kernels_and_runtime():
    run = profile(_sleep_pipeline(100_000), requests=2, warmup=1, traced=2)
    assert run.meta.trace.activities == ["cpu", "cuda"]
    import gzip
    import json

    cats = {e.get("cat") for e in json.loads(gzip.open(run.trace_path).read())["traceEvents"]}
    assert "kernel" in cats and "cuda_runtime" in cats


def test_cuda_timing_through_the_timeout_guard_keeps_device_times():
    # the stages run on the guard's worker thread; CUDA events and the device must follow them there
    run = profile(
        _sleep_pipeline(2_000_000), requests=5, warmup=1, traced=0, sync="stage", timeout_s=30
    )
    launch = run.stages[(run.stages["stage"] == "launch") & (run.stages["request"] >= 1)]
    assert run.meta.status == "complete" and run.requests["ok"].all()
    assert (launch["device_dur_ns"] > 100_000).all()
    assert (launch["dur_ns"] >= launch["device_dur_ns"] * 0.95).all()


def test_cuda_stage_past_the_timeout_is_a_timeout_failure():
    # about 2 s of GPU sleep against a 0.3 s timeout: the host waits in the stage-sync synchronize
    run = profile(
        _sleep_pipeline(4_000_000_000), requests=3, warmup=0, traced=0, sync="stage", timeout_s=0.3
    )
    assert run.meta.status == "incomplete: timeout"
    assert list(run.requests["error_type"]) == ["Timeout"]
    assert run.requests["error_stage"].iloc[0] == "launch"
    _join_abandoned_stage_threads()


def _join_abandoned_stage_threads():
    """Wait for the abandoned stage thread's synchronize to return: left blocked in it, the thread would abort
    the test process at exit (the CLI leaves with os._exit instead, ``workbench.cli.exit_past_threads``)."""
    from workbench.guard import stage_threads_alive

    for thread in stage_threads_alive():
        thread.join(timeout=30)
    assert not stage_threads_alive()
