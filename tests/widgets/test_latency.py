"""LatencyExplorer through its widget state: move a control, read the figure data."""

from __future__ import annotations

import base64
import itertools

import numpy as np

import pytest

from workbench import Pipeline, PrecisionError
from workbench.analysis.budget import stage_summary
from workbench.config import PipelineConfig
from workbench.errors import ConfigError
from workbench.widgets import LatencyExplorer, LiveRuns

from widget_fakes import STAGES, FakeProfile, synthetic_run


def decode(values) -> list[float]:
    """Plotly JSON arrays: plain lists or typed arrays ({"dtype", "bdata" base64})."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def p99_bars(explorer: LatencyExplorer) -> dict[str, float]:
    bar = next(t for t in explorer.budget_pane.figure.data if t.name == "p99")
    return dict(zip(bar.x, bar.y))


def expected_p99(batch_size: int, precision: str = "fp32") -> dict[str, float]:
    run = synthetic_run("text", PipelineConfig(batch_size=batch_size, precision=precision), 20, 3)
    summary = stage_summary(run)
    return dict(zip(summary["name"], summary["p99_ms"]))


def explorer(fake: FakeProfile, **kwargs) -> LatencyExplorer:
    return LatencyExplorer(
        "text", live=LiveRuns(profile=fake, requests=20, warmup=3), debounce_s=0, **kwargs
    ).wait()


def test_first_view_shows_the_budget_of_the_first_run(fake_profile):
    ex = explorer(fake_profile)
    assert fake_profile.calls == [("text", "cpu", 1, "fp32")]
    assert p99_bars(ex) == pytest.approx(expected_p99(1))
    assert (
        ex.budget_pane.updates == 1
        and ex.distribution_pane.updates == 1
        and ex.flame_pane.updates == 1
    )
    assert "measured here" in ex.status.value
    assert ex.message == ""


def test_moving_the_batch_size_slider_reprofiles_and_updates_the_figures(fake_profile):
    ex = explorer(fake_profile)
    view = ex.budget_pane.view
    ex.batch_size.value = 8
    ex.wait()
    assert fake_profile.calls[-1] == ("text", "cpu", 8, "fp32")
    assert p99_bars(ex) == pytest.approx(expected_p99(8))
    assert ex.budget_pane.view is view  # the same widget, updated in place
    sent = ex.budget_pane.view.outputs[0]["data"]["application/vnd.plotly.v1+json"]["data"][2]
    assert sent["name"] == "p99"
    assert dict(zip(sent["x"], decode(sent["y"]))) == pytest.approx(expected_p99(8))


def test_set_moves_several_controls_and_profiles_once(fake_profile):
    ex = explorer(fake_profile)
    ex.set(batch_size=4, precision="bf16", sla_ms=10).wait()
    assert fake_profile.calls == [("text", "cpu", 1, "fp32"), ("text", "cpu", 4, "bf16")]
    assert [s.y0 for s in ex.budget_pane.figure.layout.shapes] == [10.0]


def test_precision_toggle_changes_the_forward_bar(fake_profile):
    ex = explorer(fake_profile)
    ex.set(precision="int8").wait()
    assert p99_bars(ex)["forward"] == pytest.approx(expected_p99(1, "int8")["forward"])
    assert p99_bars(ex)["forward"] < expected_p99(1)["forward"]


def test_returning_to_a_seen_configuration_uses_the_cache(fake_profile):
    ex = explorer(fake_profile)
    ex.set(batch_size=4).wait()
    before = len(fake_profile.calls)
    ex.set(batch_size=1).wait()
    assert len(fake_profile.calls) == before  # no re-profiling
    assert p99_bars(ex) == pytest.approx(expected_p99(1))
    assert ex.cache.hits >= 1
    ex.rerun_button.click()
    ex.wait()
    assert len(fake_profile.calls) == before + 1  # "measure here" forces a run


def test_debounce_collapses_rapid_slider_moves_into_one_run():
    fake = FakeProfile()
    ex = LatencyExplorer("text", live=LiveRuns(profile=fake), debounce_s=0.2, start=False)
    for bs in (2, 4, 8, 16):
        ex.batch_size.value = bs
    ex.wait()
    assert fake.calls == [("text", "cpu", 16, "fp32")]
    assert p99_bars(ex) == pytest.approx(expected_p99(16))


def test_cancel_stops_the_run_and_keeps_the_last_figures():
    fake = FakeProfile()
    ex = explorer(fake)
    shown = p99_bars(ex)
    fake.block = True
    fake.started.clear()
    ex.set(batch_size=32)
    assert fake.started.wait(5)
    assert ex.cancel_button.disabled is False
    assert ex.progress.layout.visibility == "visible"
    ex.cancel_button.click()
    ex.wait()
    assert "cancelled" in ex.message
    assert p99_bars(ex) == shown
    assert ("text", "cpu", 32, "fp32", 1) not in ex.cache
    assert ex.cancel_button.disabled is True and ex.progress.layout.visibility == "hidden"


def test_unsupported_combination_shows_a_message_not_a_traceback(fake_profile):
    def build(config):
        if config.precision == "fp16":
            raise PrecisionError(
                "precision fp16 on device cpu: not supported by this model; use bf16"
            )
        pipe = Pipeline("mine", items=lambda: itertools.count())
        pipe.add("echo", lambda batch: batch)
        return pipe

    ex = LatencyExplorer(build, live=LiveRuns(profile=fake_profile), debounce_s=0).wait()
    shown = p99_bars(ex)
    ex.set(precision="fp16").wait()
    assert ex.message_line.level == "error"
    assert ex.message == "precision fp16 on device cpu: not supported by this model; use bf16"
    assert "Traceback" not in ex.message_line.view.value
    assert_cleared(ex, "build cpu bs=1 fp16 threads=1")  # the fp32 bars would pass for fp16's
    ex.set(precision="bf16").wait()
    assert ex.message == "" and p99_bars(ex).keys() == shown.keys()


def assert_cleared(ex: LatencyExplorer, key_text: str) -> None:
    """Every figure of the configuration says it was not run; nothing of another run stays on screen."""
    assert ex.current is None
    for pane in (
        ex.budget_pane,
        ex.tail_pane,
        ex.distribution_pane,
        ex.over_run_pane,
        ex.request_pane,
        ex.flame_pane,
    ):
        fig = pane.figure.to_dict()
        assert fig["data"] == [], pane
        assert [a["text"] for a in fig["layout"]["annotations"]] == [
            f"not run: {key_text}: see the message above"
        ]
    assert ex.request_picker.options == (("(none)", None),)


def test_a_device_that_cannot_run_is_refused_at_once(fake_profile, monkeypatch):
    import workbench.widgets.latency as latency

    monkeypatch.setattr(latency, "available_devices", lambda: ["cpu", "cuda"])
    monkeypatch.setattr("workbench.device.cuda_available", lambda: False)
    ex = explorer(fake_profile)
    ex.set(device="cuda").wait()
    assert (
        ex.message == "device 'cuda' requested but no CUDA GPU is available here; use --device cpu"
    )
    monkeypatch.setattr("workbench.device.cuda_available", lambda: True)
    ex.set(precision="int8").wait()
    assert ex.message.startswith("precision int8 on device cuda: dynamic int8 quantization")
    assert ex.message_line.level == "error" and "not run" in ex.status.value
    assert fake_profile.calls == [("text", "cpu", 1, "fp32")]  # nothing was profiled


def test_config_error_from_the_runner_is_shown(fake_profile):
    def failing(*args, **kwargs):
        raise ConfigError("requests must be an integer >= 1, got 0")

    ex = LatencyExplorer("text", live=LiveRuns(profile=failing), debounce_s=0).wait()
    assert ex.message == "requests must be an integer >= 1, got 0"
    assert_cleared(ex, "text cpu bs=1 fp32 threads=1")


def test_sla_field_redraws_the_budget_without_profiling(fake_profile):
    ex = explorer(fake_profile)
    ex.set(sla_ms=5.0)
    assert len(fake_profile.calls) == 1
    assert [s.y0 for s in ex.budget_pane.figure.layout.shapes] == [5.0]
    ex.set(sla_ms=None)
    assert ex.budget_pane.figure.layout.shapes == ()


def test_distribution_controls_pick_stage_and_kind(fake_profile):
    ex = explorer(fake_profile)
    assert [v for _, v in ex.stage.options] == ["", *STAGES]
    ex.set(stage="forward", kind="cdf")
    title = ex.distribution_pane.figure.layout.title.text
    assert "forward" in title
    assert ex.distribution_pane.figure.data[0].type == "scatter"


def test_recorded_runs_are_shown_without_profiling(tmp_path, fake_profile):
    run = synthetic_run("text", PipelineConfig(batch_size=2), 20, 3)
    run.save(tmp_path / "text-cpu-bs2-fp32")
    ex = LatencyExplorer(
        "text", live=LiveRuns(profile=fake_profile), debounce_s=0, runs=tmp_path, batch_size=2
    ).wait()
    assert fake_profile.calls == []
    assert "recorded run" in ex.status.value
    assert p99_bars(ex) == pytest.approx(expected_p99(2))


def test_index_of_recorded_runs_skips_variants_and_other_folders(tmp_path):
    from tests.support.run_index import index_runs

    synthetic_run("text", PipelineConfig(batch_size=2), 5, 1).save(tmp_path / "text-cpu-bs2-fp32")
    synthetic_run("text", PipelineConfig(batch_size=4, options={"pin_memory": False}), 5, 1).save(
        tmp_path / "variant"
    )
    (tmp_path / "notes").mkdir()
    assert index_runs(tmp_path) == {("text", "cpu", 2, "fp32"): tmp_path / "text-cpu-bs2-fp32"}
    assert index_runs(tmp_path / "text-cpu-bs2-fp32") == {
        ("text", "cpu", 2, "fp32"): tmp_path / "text-cpu-bs2-fp32"
    }
    assert index_runs(None) == {}


def test_set_rejects_unknown_controls(fake_profile):
    ex = explorer(fake_profile)
    with pytest.raises(TypeError, match="unknown controls"):
        ex.set(batchsize=2)


def test_unknown_example_is_a_pipeline_error():
    from workbench.errors import PipelineError

    with pytest.raises(PipelineError, match="unknown example"):
        LatencyExplorer("nope", start=False)


def test_a_keyword_of_how_runs_are_made_names_live_runs(fake_profile):
    with pytest.raises(TypeError, match=r"unknown keywords \['profile_fn'\].*live=LiveRuns"):
        LatencyExplorer("text", profile_fn=fake_profile, start=False)


def test_device_choices_follow_cuda_availability(fake_profile, monkeypatch):
    ex = LatencyExplorer("text", live=LiveRuns(profile=fake_profile), start=False)
    from workbench.device import available_devices

    assert list(ex.device.options) == available_devices()
    assert set(ex.precision.options) == {"fp32", "bf16", "fp16", "int8"}


def test_the_far_tail_pane_follows_the_distribution_stage(fake_profile):
    ex = explorer(fake_profile)
    first = ex.survival_pane.figure
    assert first.layout.title.text.startswith("Far tail: end to end")
    assert first.layout.yaxis.type == "log" and first.data[0].name == "measured (n=20)"
    assert first.data[3].name == "p99.9: 20 requests; 5661 bound it"
    assert decode(first.data[0].y)[-1] == 1 / 20  # the slowest request, one in twenty
    ex.set(stage="forward")
    assert ex.survival_pane.figure.layout.title.text.startswith("Far tail: forward")
    assert ex.survival_pane.updates == 2
