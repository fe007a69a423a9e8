"""`show` prints and `show --json` carries noise, throughput, int8 coverage and the p99 interval's bound."""

import json

from tests.conftest import FakeClock, toy_pipeline
from tests.test_noise import FakeReadings, ticks
from workbench import PipelineConfig, profile
from workbench.cli import main


def saved_run(tmp_path, requests=10, readings=None):
    clock = FakeClock()
    pipe = toy_pipeline(clock, {"parse": 250_000, "forward": 750_000})  # 1 ms per request
    run = profile(
        pipe,
        PipelineConfig(batch_size=2),
        requests=requests,
        warmup=1,
        traced=0,
        clock=clock,
        noise_readings=readings,
    )
    return run.save(tmp_path / "run")


def test_show_json_has_noise_throughput_and_failures(tmp_path, capsys):
    readings = FakeReadings(cpu=[ticks(0), ticks(1_900, idle=100)], own=[0, 500], wall=[0.0, 10.0])
    path = saved_run(tmp_path, readings=readings)
    assert main(["show", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["throughput_items_per_s"] == 2000.0  # 2 items per 1 ms request
    assert report["noise"]["noisy"] is True
    assert report["noise"]["reasons"][0] == "other processes used 1.4 of 2 cores during the run"
    assert report["failures"] == {} and report["errors"] == {"parse": 0, "forward": 0}
    assert report["fingerprint"]["batch_size"] == 2


def test_show_text_has_the_noise_line_throughput_and_the_unbounded_p99(tmp_path, capsys):
    readings = FakeReadings(cpu=[ticks(0), ticks(1_900, idle=100)], own=[0, 500], wall=[0.0, 10.0])
    path = saved_run(tmp_path, readings=readings)
    assert main(["show", str(path)]) == 0
    text = capsys.readouterr().out
    assert "noise: NOISY: other processes used 1.4 of 2 cores during the run" in text
    assert "throughput: 2000.0 items/s" in text
    assert (
        "p99 end to end 95% CI: [1.000, unbounded] ms: 10 successful requests; 563 bound it" in text
    )


def test_old_runs_say_noise_was_not_recorded(capsys):
    from tests.conftest import REPO

    assert (
        main(["show", str(REPO / "data" / "runs" / "image-cuda-bs1-fp32"), "--json"]) == 0
    )  # recorded before noise was measured
    report = json.loads(capsys.readouterr().out)
    assert report["noise"]["noisy"] is None
    assert report["noise"]["reasons"] == ["not recorded (run made before noise was measured)"]
    assert report["throughput_items_per_s"] > 0
