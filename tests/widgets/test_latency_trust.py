"""LatencyExplorer shows what a number can be trusted for: threads, noise, failures, recorded-run matching,
recorded GPU runs on a CPU-only machine, tail views, and "pin as A, compare with B"."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch
from widget_fakes import NOISY, STAGES, FakeProfile, MetaProfile, synthetic_run

from workbench import Pipeline
from workbench.config import PipelineConfig
from workbench.fingerprint import model_fingerprint
from workbench.widgets import LatencyExplorer, LiveRuns
from workbench.widgets.latency import THREADS_WHY


def build(config):
    """A tiny pipeline declaring one model, so the run has a model fingerprint."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    pipe = Pipeline("mine", items=lambda: itertools.count(), models=[model])
    pipe.add("echo", lambda batch: batch)
    return pipe


def fingerprint(config: PipelineConfig, **changes) -> dict:
    """The fingerprint a live run of ``build`` with ``config`` records here."""
    from workbench.widgets.latency_support import cheap_fingerprint

    fp = cheap_fingerprint(build, config) | {
        "pipeline": "mine",
        "model": model_fingerprint([build(config).models[0]]),
    }
    return fp | changes


def record(folder, config: PipelineConfig, fp: dict | None, env: dict | None = None):
    run = synthetic_run(fp["pipeline"] if fp else "text", config, 20, 3)
    run.meta = run.meta.replace(env=env or {}, **({"fingerprint": fp} if fp is not None else {}))
    return run.save(folder)


def test_live_runs_use_one_thread_by_default_and_the_control_changes_it():
    fake = FakeProfile()
    ex = LatencyExplorer(
        "text", live=LiveRuns(profile=fake, requests=20, warmup=3), debounce_s=0
    ).wait()
    assert ex.threads.value == 1 and fake.configs[-1].threads == 1
    assert THREADS_WHY in ex.threads_why.value and "busy-waits" in THREADS_WHY
    ex.set(threads=2).wait()
    assert [c.threads for c in fake.configs] == [1, 2]
    assert ex.status.value.startswith("text cpu bs=1 fp32: measured here")
    ex.set(threads=None).wait()
    assert fake.configs[-1].threads is None
    assert ("torch default", None) in ex.threads.options


def test_noisy_run_shows_its_reasons_and_fix_as_a_warning():
    ex = LatencyExplorer(
        "text", live=LiveRuns(profile=MetaProfile({"noise": NOISY})), debounce_s=0
    ).wait()
    assert ex.noise_line.level == "warning"
    assert ex.noise_line.text == (
        "noise: NOISY: other processes used 1.4 of 2 cores during the run; "
        "fix: --threads 1 (PipelineConfig(threads=1))"
    )
    quiet = {"noisy": False, "reasons": [], "fix": None, "other_cores": 0.05, "steal_pct": 0.0}
    ex2 = LatencyExplorer(
        "text", live=LiveRuns(profile=MetaProfile({"noise": quiet})), debounce_s=0
    ).wait()
    assert (ex2.noise_line.level, ex2.noise_line.text) == (
        "info",
        "noise: quiet (other processes 0.05 cores, steal 0.0 %)",
    )


def test_a_run_without_noise_readings_says_so():
    ex = LatencyExplorer("text", live=LiveRuns(profile=FakeProfile()), debounce_s=0).wait()
    assert (
        ex.noise_line.text == "noise: unknown (not recorded (run made before noise was measured))"
    )


def test_failures_line_gives_counts_shares_and_messages_per_stage():
    ex = LatencyExplorer(
        "text", live=LiveRuns(profile=MetaProfile(fail={5, 6}), requests=20, warmup=3), debounce_s=0
    ).wait()
    assert ex.failures_line.level == "warning"
    assert ex.failures_line.text == (
        "failures (left out of the percentiles): forward 2 (10%): "
        "RuntimeError: out of memory x2 at model.py:12 in forward"
    )
    assert "2 measured requests failed" in ex.status.value


def test_recorded_run_of_another_model_is_not_shown(tmp_path):
    config = PipelineConfig(threads=1)
    record(
        tmp_path / "other-model",
        config,
        fingerprint(config, model={"params": 999, "hash": "0123456789abcdef"}),
    )
    fake = FakeProfile()
    ex = LatencyExplorer(build, runs=tmp_path, live=LiveRuns(profile=fake), debounce_s=0).wait()
    assert len(fake.calls) == 1 and "measured here" in ex.status.value


def test_matching_recorded_run_is_shown_with_host_differences_labelled(tmp_path):
    config = PipelineConfig(threads=1)
    fp = fingerprint(config)
    record(
        tmp_path / "same",
        config,
        fp | {"host": {"cpu_model": "Other CPU", "cores": 64}},
        env={"cpu_model": "Other CPU"},
    )
    fake = FakeProfile()
    ex = LatencyExplorer(build, runs=tmp_path, live=LiveRuns(profile=fake), debounce_s=0).wait()
    assert fake.calls == []
    assert "recorded run same" in ex.status.value and "recorded on Other CPU" in ex.status.value
    assert ex.notes.text == (
        f"recorded with host.cpu_model 'Other CPU', here {fp['host']['cpu_model']!r}; "
        f"recorded with host.cores 64, here {fp['host']['cores']!r}"
    )


def test_recorded_run_with_other_threads_is_not_used_but_named(tmp_path):
    config = PipelineConfig(threads=2)
    record(tmp_path / "two-threads", config, fingerprint(config))
    fake = FakeProfile()
    ex = LatencyExplorer(build, runs=tmp_path, live=LiveRuns(profile=fake), debounce_s=0).wait()
    assert [c.threads for c in fake.configs] == [1]
    assert ex.status.value.endswith(
        "; a recorded run (two-threads) has 2 threads: pick that to see it"
    )
    ex.set(threads=2).wait()
    assert len(fake.calls) == 1 and "recorded run two-threads" in ex.status.value


def test_recorded_gpu_runs_are_offered_on_a_cpu_only_machine(tmp_path, monkeypatch):
    monkeypatch.setattr("workbench.widgets.latency.available_devices", lambda: ["cpu"])
    gpu = PipelineConfig(device="cuda", batch_size=1)
    run = synthetic_run("text", gpu, 20, 3)
    run.meta = run.meta.replace(env={"device_name": "NVIDIA H200", "threads": 16})
    run.save(tmp_path / "text-cuda-bs1-fp32")
    fake = FakeProfile()
    ex = LatencyExplorer("text", runs=tmp_path, live=LiveRuns(profile=fake), debounce_s=0).wait()
    assert list(ex.device.options) == [("cpu", "cpu"), ("cuda (recorded on NVIDIA H200)", "cuda")]
    ex.set(device="cuda").wait()
    assert len(fake.calls) == 1  # only the first, live cpu view
    assert "recorded on NVIDIA H200" in ex.status.value and ex.message == ""
    assert ex.notes.text == (
        "recorded with 16 CPU threads (cannot be measured here); "
        "not recorded: factory, torch, workbench, host.cpu_model, host.cores"
    )
    ex.set(batch_size=8).wait()
    assert ex.message == (
        "device 'cuda' requested but no CUDA GPU is available here; use --device cpu; "
        "recorded cuda runs: text-cuda-bs1-fp32"
    )
    assert len(fake.calls) == 1


def test_a_run_timed_with_sync_request_never_stands_in(tmp_path, monkeypatch):
    """data/runs holds text-cuda-bs1024-fp32 and its -sync-request twin (same fingerprint, timed the wrong way for
    notebook 3): the twin sorts last, and the last match would win, so it must not be a candidate at all."""
    monkeypatch.setattr("workbench.widgets.latency.available_devices", lambda: ["cpu"])
    gpu = PipelineConfig(device="cuda", batch_size=1)
    for name, sync in (
        ("text-cuda-bs1-fp32", "stage"),
        ("text-cuda-bs1-fp32-sync-request", "request"),
    ):
        run = synthetic_run("text", gpu, 20, 3)
        run.meta = run.meta.replace(
            env={"device_name": "NVIDIA H100", "threads": 16},
            timing=run.meta.timing.to_dict() | {"sync": sync},
        )
        run.save(tmp_path / name)
    ex = LatencyExplorer(
        "text", runs=tmp_path, live=LiveRuns(profile=FakeProfile()), debounce_s=0
    ).wait()
    ex.set(device="cuda").wait()
    assert (
        "recorded run text-cuda-bs1-fp32 " in ex.status.value + " "
        and "sync-request" not in ex.status.value
    )


def test_live_profiling_off_in_a_room_is_said_and_recorded_runs_still_show(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_LIVE", "off")
    ex = LatencyExplorer("text", live=LiveRuns(profile=FakeProfile()), debounce_s=0).wait()
    assert ex.message_line.level == "error" and ex.message.startswith(
        "live profiling is off on this server"
    )


def test_request_picker_starts_at_the_slowest_request_and_shows_its_stages():
    ex = LatencyExplorer(
        "text", live=LiveRuns(profile=FakeProfile(), requests=20, warmup=3), debounce_s=0
    ).wait()
    assert ex.request_picker.value == 22
    assert ex.request_picker.options[0] == ("request 22: 12.116 ms (slowest)", 22)
    bar = ex.request_pane.figure.data[0]
    assert list(bar.y) == [*STAGES, "unattributed"]
    assert list(bar.x) == pytest.approx([1.022, 8.022, 3.022, 0.05])
    assert ex.request_pane.figure.layout.title.text == "Stages of request 22: 12.116 ms end to end"
    ring = ex.over_run_pane.figure.data[-1]
    assert (ring.name, list(ring.x), list(ring.y)) == ("request 22", [22], [12.116])
    ex.set(request=3)
    assert ex.request_pane.figure.layout.title.text == "Stages of request 3: 12.059 ms end to end"
    assert list(ex.over_run_pane.figure.data[-1].x) == [3]


def test_tail_attribution_figure_has_a_bar_per_stage():
    ex = LatencyExplorer(
        "text", live=LiveRuns(profile=FakeProfile(), requests=20, warmup=3), debounce_s=0
    ).wait()
    names = [t.name for t in ex.tail_pane.figure.data]
    assert names == [*STAGES, "unattributed"]
    forward = next(t for t in ex.tail_pane.figure.data if t.name == "forward")
    # the slowest 5 % is request 22: forward 8.022 of 12.116 ms
    shares = dict(zip(forward.y, forward.x))
    assert shares["slowest 5 %"] == pytest.approx(8.022 / 12.116)


def fake_compare(calls):
    def compare(target, configs, *, requests, warmup):
        calls.append((target, [(c.batch_size, c.threads) for c in configs], requests))
        e2e = {"name": "end_to_end", "p50_ratio": 1.5, "p50_ci": [1.4, 1.6], "verdict": "slower"}
        result = {
            "kind": "interleaved",
            "metric": "p50",
            "min_effect": 0.02,
            "configs": [{"label": "A"}, {"label": "B"}],
            "stages": [
                {"name": "forward", "p50_ratio": 1.9, "p50_ci": [1.7, 2.1], "verdict": "slower"}
            ],
            "end_to_end": e2e,
        }
        return SimpleNamespace(result=result)

    return compare


def test_pin_as_a_then_compare_with_b_draws_the_ratio_with_its_interval():
    calls = []
    ex = LatencyExplorer(
        "text",
        live=LiveRuns(profile=FakeProfile(), compare=fake_compare(calls), compare_requests=50),
        debounce_s=0,
    ).wait()
    ex.compare_button.click()
    assert ex.message.startswith("nothing pinned")
    ex.pin_button.click()
    assert ex.pin_label.value == "A: text cpu bs=1 fp32 threads=1"
    ex.compare_button.click()
    assert ex.message == "B is the pinned configuration A itself: move a control first"
    ex.set(batch_size=4).wait()
    ex.compare_button.click()
    ex.wait()
    assert calls == [("text", [(1, 1), (4, 1)], 50)]
    trace = ex.compare_pane.figure.data[0]
    assert list(trace.x) == ["forward", "end to end"] and list(trace.y) == [1.9, 1.5]
    assert list(trace.error_y.array) == pytest.approx([0.2, 0.1])
    assert ex.status.value == (
        "B text cpu bs=4 fp32 threads=1 vs A text cpu bs=1 fp32 threads=1: "
        "end to end p50 ratio 1.500 [1.400, 1.600]: slower"
    )


def test_compare_with_the_real_interleaved_comparison():
    def tiny(config):
        pipe = Pipeline("tiny", items=lambda: itertools.count())
        pipe.add("echo", lambda batch: [x * config.batch_size for x in batch])
        return pipe

    ex = LatencyExplorer(
        tiny, live=LiveRuns(profile=FakeProfile(), compare_requests=20), debounce_s=0
    ).wait()
    ex.pin()
    ex.set(batch_size=2).wait()
    ex.compare()
    ex.wait()
    assert ex.comparison["kind"] == "interleaved"
    assert [s["name"] for s in ex.comparison["stages"]] == ["echo"]
    assert ex.status.value.startswith(
        "B tiny cpu bs=2 fp32 threads=1 vs A tiny cpu bs=1 fp32 threads=1: end to end p50 ratio"
    )


def test_a_run_superseded_by_a_cached_setting_is_cancelled_without_a_message():
    fake = FakeProfile()
    ex = LatencyExplorer("text", live=LiveRuns(profile=fake), debounce_s=0).wait()
    fake.block = True
    fake.started.clear()
    ex.set(batch_size=32)
    assert fake.started.wait(5)
    ex.set(batch_size=1)  # cached: drawn at once, and the running profile is no longer wanted
    ex.wait()
    assert ex.message == "" and ex.status.value.startswith("text cpu bs=1 fp32: measured here")
    assert ("text", "cpu", 32, "fp32", 1) not in ex.cache


def test_threads_recorded_opens_on_the_recorded_run_and_says_how_to_measure_live(tmp_path):
    record(
        tmp_path / "two-threads", PipelineConfig(threads=2), fingerprint(PipelineConfig(threads=2))
    )
    fake = FakeProfile()
    ex = LatencyExplorer(
        build, runs=tmp_path, live=LiveRuns(profile=fake), debounce_s=0, threads="recorded"
    ).wait()
    assert ex.threads.value == 2 and fake.calls == []
    assert "recorded run two-threads" in ex.status.value
    assert (
        "threads: 2 as the recorded runs; for live runs pick 1: torch's CPU thread pool busy-waits"
        in ex.threads_why.value
    )
    ex.set(threads=1).wait()
    assert [c.threads for c in fake.configs] == [1]
    empty = LatencyExplorer(
        build,
        runs=tmp_path / "none",
        live=LiveRuns(profile=FakeProfile()),
        threads="recorded",
        start=False,
    )
    assert empty.threads.value == 1
