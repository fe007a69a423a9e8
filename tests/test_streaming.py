"""Streaming stages (workbench.timing): each unit's time recorded, saved with the run."""

import itertools
import time

import pytest

from tests.conftest import streaming_pipeline
from workbench import Pipeline, profile
from workbench.errors import ConfigError, PipelineError
from workbench.analysis.trace_stages import trace_stage_summary
from workbench.record import load_run
from workbench.trace import load_trace


def test_each_unit_is_timed_and_saved_with_the_run(fake_clock, tmp_path):
    pipe = streaming_pipeline(fake_clock, prefill_ns=5_000, step_ns=100, growth_ns=100, tokens=4)
    run = profile(pipe, requests=2, warmup=1, traced=0, clock=fake_clock)
    # a request: tokenize 1,000, prefill 5,000, steps 200, 300, 400, detokenize 300 = 7,200 ns
    assert list(run.requests["dur_ns"]) == [7_200] * 3
    units = run.units
    assert list(units["request"]) == [0] * 4 + [1] * 4 + [2] * 4
    assert list(units["unit"]) == [0, 1, 2, 3] * 3
    assert set(units["stage"]) == {"generate"}
    first = [6_000, 6_200, 6_500, 6_900]
    assert list(units["at_ns"]) == [t + 7_200 * r for r in range(3) for t in first]
    gen = run.stages[run.stages["stage"] == "generate"]
    assert list(gen["dur_ns"]) == [5_900] * 3  # the stage ends at its last unit
    run.save(tmp_path / "r")
    again = load_run(tmp_path / "r")
    assert again.units.equals(units)


def test_a_run_without_a_streaming_stage_has_no_units_table(fake_clock, tmp_path):
    pipe = Pipeline("plain", items=lambda: itertools.count())
    pipe.add("double", lambda batch: [2 * x for x in batch])
    run = profile(pipe, requests=2, warmup=0, traced=0, clock=fake_clock)
    run.save(tmp_path / "plain")
    assert run.units is None and not (tmp_path / "plain" / "units.parquet").exists()
    assert load_run(tmp_path / "plain").units is None


def test_the_stage_after_a_streaming_stage_runs_once_on_the_whole_answer(fake_clock):
    pipe = streaming_pipeline(fake_clock, tokens=3)
    seen = []
    pipe.stages[-1] = type(pipe.stages[-1])("detokenize", lambda steps: seen.append(steps))
    profile(pipe, requests=1, warmup=0, traced=0, clock=fake_clock)
    assert seen == [[[0], [1], [2]]]
    assert pipe([5, 6]) is None and seen[-1] == [[0, 0], [1, 1], [2, 2]]  # untimed call alike


def test_an_undeclared_generator_is_refused_and_the_message_names_stream_true(fake_clock):
    pipe = Pipeline("lazy", items=lambda: itertools.count())
    pipe.add("generate", lambda batch: (x for x in batch))
    with pytest.raises(PipelineError, match=r"@pipe.stage\(stream=True\) to time each unit"):
        profile(pipe, requests=1, warmup=0, traced=0, clock=fake_clock)


def test_a_streaming_stage_that_returns_no_iterable_is_named(fake_clock):
    pipe = Pipeline("bad", items=lambda: itertools.count())
    pipe.add("generate", lambda batch: 3, stream=True)
    run = profile(pipe, requests=1, warmup=0, traced=0, clock=fake_clock)
    failure = run.requests.iloc[0]
    assert (failure["error_stage"], failure["error_type"]) == ("generate", "PipelineError")
    assert failure["error_message"] == (
        "stage 'generate' is declared stream=True but returned int, which is not iterable; "
        "yield its units (tokens, chunks)"
    )


def test_only_one_stage_may_stream():
    pipe = Pipeline("two", items=lambda: itertools.count())
    pipe.add("a", lambda b: iter(b), stream=True)
    with pytest.raises(ConfigError, match=r"^pipeline 'two': stage 'b' streams, and so does"):
        pipe.add("b", lambda b: iter(b), stream=True)


def test_a_generative_run_is_bounded_by_time_as_well_as_by_count(fake_clock):
    # a request: tokenize 1,000 + prefill 5,000 + 3 steps of 1,000 + detokenize 300 = 9,300 ns
    pipe = streaming_pipeline(fake_clock, tokens=4)
    run = profile(pipe, requests=1000, warmup=0, traced=0, clock=fake_clock, max_duration_s=50e-6)
    assert run.meta.timing.stopped_by == "max_duration_s"
    assert len(run.requests) == 6 and run.units["request"].nunique() == 6  # 6 x 9,300 ns >= 50 us


def test_the_traced_run_charges_a_streaming_stages_units_to_its_own_range():
    pytest.importorskip("torch")
    pipe = Pipeline("sleepy", items=lambda: itertools.count())

    def generate(batch):
        for k in range(3):
            time.sleep(0.002)
            yield k

    pipe.add("generate", generate, stream=True)
    pipe.add("detokenize", list)
    run = profile(pipe, requests=1, warmup=0, traced=2, sample_stacks=False)
    host = trace_stage_summary(load_trace(run.trace_path)).set_index("stage")["host_ns"]
    assert host["generate"] >= 2 * 3 * 2_000_000  # two traced requests of three 2 ms units
    assert (
        host["detokenize"] < host["generate"] / 10
    )  # was the whole answer: it consumed the generator
    run.close()
