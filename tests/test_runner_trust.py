"""The runner records what it measured: config honoured, threads, run length, fingerprint, noise, int8."""

import itertools
import json
import threading

import pytest
import torch

from tests.conftest import FakeClock, toy_pipeline
from tests.test_noise import FakeReadings, ticks
from workbench import Pipeline, PipelineConfig, profile
from workbench.runner import MeasurePlan
from workbench.errors import ConfigError, PrecisionError
from workbench.pipeline import exception_where
from workbench.precision import prepare_model


def test_built_pipeline_with_a_config_is_honoured_or_refused(fake_clock):
    pipe = toy_pipeline(fake_clock, {"parse": 1, "forward": 1})
    run = profile(
        pipe, PipelineConfig(batch_size=3), requests=2, warmup=0, traced=0, clock=fake_clock
    )
    assert run.meta.config.batch_size == 3 and run.requests["batch_size"].tolist() == [3, 3]
    with pytest.raises(
        ConfigError,
        match=r"built with precision='fp32' but the config asks for precision='bf16'.*"
        r"pass its factory",
    ):
        profile(
            pipe,
            PipelineConfig(batch_size=8, precision="bf16"),
            requests=2,
            traced=0,
            clock=fake_clock,
        )
    with pytest.raises(ConfigError, match="options"):
        profile(pipe, PipelineConfig(options={"hidden": 8}), requests=2, traced=0, clock=fake_clock)


def _fresh_thread_default() -> int:
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    t.start()
    t.join()
    return seen[0]


def test_threads_apply_in_the_thread_that_runs_the_stages_and_are_recorded():
    wanted = (
        2 if _fresh_thread_default() == 1 else 1
    )  # differs from what a new thread would get by itself
    seen, result = [], {}
    pipe = Pipeline("t", items=lambda: itertools.count())
    pipe.add("forward", lambda b: seen.append(torch.get_num_threads()) or b)

    def worker():  # the explorer profiles on a worker thread
        result["run"] = profile(
            pipe, PipelineConfig(threads=wanted), requests=3, warmup=1, traced=0
        )
        result["after"] = torch.get_num_threads()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    run = result["run"]
    assert seen == [wanted] * 4
    assert run.meta.config.threads == wanted and run.meta.env.threads == wanted
    assert run.meta.fingerprint.threads == wanted
    assert result["after"] == _fresh_thread_default()  # restored after the run


def test_threads_must_be_a_positive_integer():
    with pytest.raises(
        ConfigError, match=r"threads must be an integer in \[1, 4_096\] threads or None"
    ):
        PipelineConfig(threads=0)
    assert PipelineConfig.from_dict(PipelineConfig(threads=2).to_dict()).threads == 2


def test_run_length_defaults_and_duration_bound():
    assert MeasurePlan().requests == 600 and MeasurePlan().max_duration_s == 30.0
    clock = FakeClock()
    pipe = toy_pipeline(clock, {"forward": 1_000_000_000})  # 1 s per request
    run = profile(pipe, requests=600, warmup=2, traced=0, clock=clock, max_duration_s=3.5)
    assert (~run.requests["warmup"]).sum() == 4  # requests starting at 0, 1, 2, 3 s; not at 4 s
    assert run.meta.timing.requests == 4 and run.meta.timing.stopped_by == "max_duration_s"


def test_fingerprint_of_a_declared_model_and_of_an_undeclared_one(fake_clock):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    pipe = toy_pipeline(fake_clock, {"forward": 1})
    run = profile(pipe, requests=1, warmup=0, traced=0, clock=fake_clock)
    fp = run.meta.fingerprint.to_dict()
    assert fp["model"] == "unknown" and "declare_model" in fp["model_note"]
    pipe.declare_model(model)
    fp = profile(pipe, requests=1, warmup=0, traced=0, clock=fake_clock).meta.fingerprint.to_dict()
    assert fp["model"]["params"] == 4 * 3 + 3 + 3 * 2 + 2
    assert len(fp["model"]["hash"]) == 16 and fp["model_note"] is None
    assert {k: fp[k] for k in ("pipeline", "precision", "device", "batch_size")} == {
        "pipeline": "toy",
        "precision": "fp32",
        "device": "cpu",
        "batch_size": 1,
    }
    assert set(fp) >= {"factory", "options", "threads", "torch", "workbench", "host"}
    json.dumps(fp)  # plain data


def test_noise_is_recorded_from_injected_readings(fake_clock):
    readings = FakeReadings(cpu=[ticks(0), ticks(1_900, idle=100)], own=[0, 500], wall=[0.0, 10.0])
    run = profile(
        toy_pipeline(fake_clock, {"forward": 5}),
        PipelineConfig(threads=1),
        requests=3,
        warmup=0,
        traced=0,
        clock=fake_clock,
        noise_readings=readings,
    )
    noise = run.meta.noise.to_dict()
    assert noise["noisy"] is True and noise["reasons"] == [
        "other processes used 1.4 of 2 cores during the run"
    ]
    assert noise["torch_threads"] == 1 and noise["fix"].startswith("a quieter machine")


class ConvOnly(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)


class ConvThenLinear(ConvOnly):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(4, 2)  # 10 of 122 parameters


def test_int8_with_nothing_to_quantize_is_refused_by_name():
    with pytest.raises(
        PrecisionError, match="int8: model ConvOnly has no Linear layer to quantize"
    ):
        prepare_model(ConvOnly(), PipelineConfig(precision="int8"))


def test_partial_int8_is_recorded_in_the_run(fake_clock):
    def build(config):
        model = prepare_model(ConvThenLinear(), config)
        pipe = Pipeline("q", items=lambda: itertools.count(), models=[model])
        pipe.add("forward", lambda b: b)
        return pipe

    run = profile(
        build, PipelineConfig(precision="int8"), requests=1, warmup=0, traced=0, clock=fake_clock
    )
    quant = run.meta.quantization.to_dict()
    assert quant["text"] == "quantized 1 of 2 parameterised modules, 8 % of parameters"
    assert quant["models"][0] == {
        "model": "ConvThenLinear",
        "modules": 2,
        "quantized_modules": 1,
        "params": 122,
        "quantized_params": 10,
        "quantized_share": 0.082,
        "text": quant["text"],
    }
    assert (
        profile(
            build, PipelineConfig(), requests=1, warmup=0, traced=0, clock=fake_clock
        ).meta.quantization
        is None
    )


def test_where_names_the_users_frame_not_the_library():
    def stage(batch):
        return json.loads(batch)  # raises inside the standard library

    try:
        stage("{not json")
    except ValueError as exc:
        where = exception_where(exc)
    line = stage.__code__.co_firstlineno + 1
    assert where == f"{__file__}:{line} in stage"
