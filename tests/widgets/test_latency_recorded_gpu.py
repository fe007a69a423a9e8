"""The recorded GPU runs in data/runs, reached from the latency explorer on a machine without a GPU.

``LatencyExplorer('text').set(device='cuda')`` once said "not run: no CUDA GPU is
available here" while listing ``text-cuda-bs1-fp32`` among the recorded runs (the
model fingerprint was never looked up for a device this machine lacks), labelled
every cuda run "recorded on NVIDIA H200" (the text runs ran on an H100), did not
offer batch 1024, and left the CPU figures on screen under the error.
"""

from __future__ import annotations

import pytest

from workbench.record import META_FILE, read_meta
from workbench.widgets import LatencyExplorer, LiveRuns


class NeverProfile:
    """A profile function that fails the test: every view here must come from a recorded run."""

    def __call__(self, *args, **kwargs):
        raise AssertionError(f"profiled {args} {kwargs}: a recorded run should have been shown")


@pytest.fixture
def runs(monkeypatch):
    from workbench.examples import data_dir

    folder = data_dir() / "runs"
    if not (folder / "text-cuda-bs1-fp32" / META_FILE).is_file():
        pytest.skip("data/runs holds no recorded text GPU run")
    monkeypatch.setattr("workbench.widgets.latency.available_devices", lambda: ["cpu"])
    return folder


def card(runs, name: str) -> str:
    return read_meta(runs / name / META_FILE).env.device_name


def test_text_on_cuda_shows_the_recorded_run_labelled_with_its_own_card(runs):
    ex = LatencyExplorer(
        "text", runs=runs, live=LiveRuns(profile=NeverProfile()), debounce_s=0
    ).wait()
    h100 = card(runs, "text-cuda-bs1-fp32")
    assert list(ex.device.options) == [("cpu", "cpu"), (f"cuda (recorded on {h100})", "cuda")]
    ex.set(device="cuda").wait()
    assert ex.message == ""
    assert (
        ex.status.value
        == f"text cuda bs=1 fp32: recorded run text-cuda-bs1-fp32 (2026-11-26, recorded on {h100})"
    )
    assert ex.current is not None and ex.budget_pane.figure.data  # drawn, not an error


def test_the_device_label_follows_the_pipeline(runs):
    ex = LatencyExplorer(
        "text", runs=runs, live=LiveRuns(profile=NeverProfile()), debounce_s=0
    ).wait()
    ex.set(pipeline="image", device="cuda", batch_size=64).wait()
    h200 = card(runs, "image-cuda-bs64-fp32")
    assert h200 != card(runs, "text-cuda-bs1-fp32")
    assert list(ex.device.options)[1] == (f"cuda (recorded on {h200})", "cuda")
    assert ex.status.value.endswith(
        f"recorded run image-cuda-bs64-fp32 (2026-11-26, recorded on {h200})"
    )


@pytest.mark.slow  # builds the text model on the CPU once for its fingerprint (torch import): about 3 s
def test_recorded_batch_sizes_are_offered_and_reached(runs):
    ex = LatencyExplorer(
        "text", runs=runs, live=LiveRuns(profile=NeverProfile()), debounce_s=0
    ).wait()
    assert 1024 in ex.batch_size.options
    for batch_size, precision in ((1024, "fp32"), (64, "bf16")):
        ex.set(device="cuda", batch_size=batch_size, precision=precision).wait()
        assert (
            ex.message == ""
            and f"recorded run text-cuda-bs{batch_size}-{precision} " in ex.status.value
        )


@pytest.mark.slow  # as above: the CPU build of a configuration no recorded run has
def test_an_unrecorded_gpu_configuration_clears_the_figures(runs):
    ex = LatencyExplorer(
        "text", runs=runs, live=LiveRuns(profile=NeverProfile()), debounce_s=0
    ).wait()
    ex.set(device="cuda").wait()
    assert ex.budget_pane.figure.data
    ex.set(batch_size=8).wait()
    assert ex.message.startswith("device 'cuda' requested but no CUDA GPU is available here")
    assert ex.current is None and ex.budget_pane.figure.data == ()
    assert ex.budget_pane.figure.layout.annotations[0].text == (
        "not run: text cuda bs=8 fp32 threads=1: see the message above"
    )
