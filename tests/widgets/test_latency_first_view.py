"""A room's first view of the latency explorer is a recorded run and costs no torch import (about 250 MB
a kernel); it decides exactly as a build would, and torch comes (and the profiler is primed on the
notebook's thread) only when something is measured."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from importlib import metadata

import pytest
from widget_fakes import FakeProfile

from workbench.config import PipelineConfig
from workbench.examples import data_dir
from workbench.widgets import LatencyExplorer, LiveRuns

torch = pytest.importorskip("torch")

RUNS = data_dir() / "runs"

FIRST_VIEW = """
import json, sys
from workbench.examples import data_dir
from workbench.widgets import LatencyExplorer, LiveRuns
from workbench.widgets.latency_support import cheap_fingerprint
out = {}
for name in ("text", "tabular", "image"):
    ex = LatencyExplorer(name, runs=data_dir() / "runs").wait(120)
    out[name] = {"status": ex.status.value, "message": ex.message, "devices": list(ex.device.options)}
out["torch"] = "torch" in sys.modules
out["version"] = cheap_fingerprint("text", ex.config)["torch"]
out["still"] = "torch" in sys.modules
print(json.dumps(out))
"""


def test_the_recorded_first_view_of_each_example_imports_no_torch():
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_VIEW], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("text", "tabular", "image"):
        assert out[name]["status"].startswith(
            f"{name} cpu bs=1 fp32: recorded run {name}-cpu-bs1-fp32 ("
        ), out[name]
        assert out[name]["message"] == ""
    assert out["torch"] is False and out["still"] is False
    assert (
        out["version"] == torch.__version__
    )  # what a live run records, read without importing torch


def _built(name: str, config: PipelineConfig) -> dict:
    """The fingerprint as the explorer computed it before the cache: cheap fields plus a real build."""
    from workbench.fingerprint import model_fingerprint
    from workbench.examples import factory
    from workbench.pipeline import resolve_pipeline
    from workbench.widgets.latency_support import cheap_fingerprint

    pipe = resolve_pipeline(factory(name), config)
    return cheap_fingerprint(name, config) | {
        "pipeline": pipe.name,
        "model": model_fingerprint(list(pipe.models)),
    }


@pytest.mark.parametrize(
    "folder",
    [
        "text-cpu-bs1-fp32",
        "text-cpu-bs8-int8",
        "text-cpu-bs8-bf16",
        "tabular-cpu-bs4-fp32",
        "image-cpu-bs8-fp32",
    ],
)
def test_the_cached_fingerprint_matches_as_a_build_does(folder, monkeypatch):
    name, _, bs, precision = folder.split("-")
    config = PipelineConfig(batch_size=int(bs[2:]), precision=precision, threads=1)
    ex = LatencyExplorer(name, runs=RUNS, live=LiveRuns(profile=FakeProfile()), start=False)
    builds = []
    monkeypatch.setattr(
        "workbench.widgets.latency_support.resolve_pipeline", lambda *a: builds.append(a)
    )  # a build would fail
    wanted = ex.recorded.fingerprint(name, config)
    monkeypatch.undo()
    assert builds == [] and wanted == _built(name, config)
    match = ex.recorded.match(wanted)
    assert match is not None and match.run.folder.name == folder


def test_the_torch_version_is_the_one_a_run_records():
    from workbench.device import torch_version

    assert metadata.version("torch") == torch.__version__ == torch_version()


def test_the_profiler_is_primed_on_the_notebooks_thread_only_before_a_live_run(monkeypatch):
    primed = []
    monkeypatch.setattr(
        "workbench.widgets.latency.prime_profiler",
        lambda: primed.append(threading.current_thread().name),
    )
    fake = FakeProfile()
    monkeypatch.setattr("workbench.runner.profile", fake)
    ex = LatencyExplorer("text", runs=RUNS, debounce_s=0).wait()
    assert "recorded run text-cpu-bs1-fp32" in ex.status.value and primed == [] and fake.calls == []
    ex.set(batch_size=8).wait()  # recorded too
    assert "recorded run text-cpu-bs8-fp32" in ex.status.value and primed == []
    ex.set(batch_size=32).wait()  # not recorded: measured here
    assert primed == [threading.current_thread().name] and fake.calls == [
        ("text", "cpu", 32, "fp32")
    ]
    ex.set(batch_size=1).wait()  # from the cache
    ex.refresh(force=True)  # "measure here"
    ex.wait()
    assert primed == [threading.current_thread().name] * 2 and len(fake.calls) == 2


def test_a_factory_is_built_never_looked_up_and_primes_first(monkeypatch):
    """The example's own factory (spec ``example:text``) matches the recorded run, but only after a build:
    the cache is for example names, so the profiler is primed in case the build finds no match."""
    from workbench import pipeline
    from workbench.examples import text

    primed, built, fake, real = [], [], FakeProfile(), pipeline.resolve_pipeline
    monkeypatch.setattr("workbench.widgets.latency.prime_profiler", lambda: primed.append(1))
    monkeypatch.setattr("workbench.runner.profile", fake)
    monkeypatch.setattr(
        "workbench.widgets.latency_support.resolve_pipeline", lambda *a: built.append(a) or real(*a)
    )
    ex = LatencyExplorer(text.build, runs=RUNS, debounce_s=0).wait()
    assert primed == [1] and len(built) == 1 and fake.calls == []
    assert "recorded run text-cpu-bs1-fp32" in ex.status.value


def test_a_recorded_configuration_starts_at_once_and_a_live_one_waits_for_the_debounce(monkeypatch):
    """Drawing a recorded run is cheap, so the debounce (for live runs' seconds) does not delay it."""
    import time

    fake = FakeProfile()
    monkeypatch.setattr("workbench.widgets.latency.prime_profiler", lambda: None)
    ex = LatencyExplorer("text", runs=RUNS, live=LiveRuns(profile=fake), debounce_s=2.0).wait()
    started = time.perf_counter()
    ex.set(batch_size=8).wait()
    assert time.perf_counter() - started < 1.5  # under the 2 s debounce, even on a busy machine
    assert "recorded run text-cpu-bs8-fp32" in ex.status.value and fake.calls == []
    started = time.perf_counter()
    ex.set(batch_size=32).wait()  # not recorded: measured, after the debounce
    assert time.perf_counter() - started >= 2.0
    assert fake.calls == [("text", "cpu", 32, "fp32")]
