import itertools
import os
import time

import pandas as pd
import pytest

from tests.conftest import FakeClock, toy_pipeline
from tests.support.set_up_garbage import SetUpGarbage
from workbench import Pipeline, PipelineConfig, profile
from workbench.record import load_run
from workbench.errors import ConfigError, PipelineError
from workbench.runner import Cancelled, MeasurePlan


def test_timing_run_records_exact_stage_times(fake_clock):
    pipe = toy_pipeline(fake_clock, {"parse": 1_000, "forward": 5_000, "serialize": 2_000})
    run = profile(pipe, requests=4, warmup=2, traced=0, clock=fake_clock)
    assert list(run.requests["warmup"]) == [True, True, False, False, False, False]
    assert list(run.requests["dur_ns"]) == [8_000] * 6
    assert list(run.requests["start_ns"]) == [0, 8_000, 16_000, 24_000, 32_000, 40_000]
    fwd = run.stages[run.stages["stage"] == "forward"]
    assert list(fwd["dur_ns"]) == [5_000] * 6
    assert list(fwd["start_ns"]) == [1_000 + 8_000 * i for i in range(6)]
    assert run.stages["device_dur_ns"].isna().all()
    assert run.meta.stages == ["parse", "forward", "serialize"]
    assert run.meta.timing.to_dict() == {
        "warmup": 2,
        "requests": 4,
        "clock": "time.perf_counter_ns",
        "sync": None,
        "device_timer": None,
        "requests_asked": 4,
        "max_duration_s": 30.0,
        "stopped_by": "requests",
    }
    assert run.trace_path is None


def test_stage_error_is_recorded_and_run_goes_on(fake_clock):
    pipe = toy_pipeline(
        fake_clock, {"parse": 10, "forward": 100, "serialize": 1}, fail={"forward": {2}}
    )
    run = profile(pipe, requests=4, warmup=0, traced=0, clock=fake_clock)
    bad = run.requests[~run.requests["ok"]]
    assert list(bad["request"]) == [2]
    assert bad.iloc[0]["error_stage"] == "forward"
    assert bad.iloc[0]["error_type"] == "ValueError"
    assert bad.iloc[0]["error_message"] == "forward rejects [2]"
    # the failed stage keeps its time; later stages did not run for that request
    rows = run.stages[run.stages["request"] == 2]
    assert list(rows["stage"]) == ["parse", "forward"]
    assert list(rows["dur_ns"]) == [10, 100]
    assert run.requests["ok"].sum() == 3


def test_items_are_grouped_into_batches(fake_clock):
    seen = []
    pipe = toy_pipeline(fake_clock, {"parse": 1})
    pipe.stages[0] = type(pipe.stages[0])("parse", lambda b: seen.append(list(b)) or b)
    profile(
        pipe.__class__(
            "toy", stages=pipe.stages, items=pipe.items, config=PipelineConfig(batch_size=3)
        ),
        requests=2,
        warmup=0,
        traced=0,
        clock=fake_clock,
    )
    assert seen == [[0, 1, 2], [3, 4, 5]]


def test_exhausted_item_source_is_a_clear_error(fake_clock):
    pipe = toy_pipeline(fake_clock, {"parse": 1})
    pipe.items = lambda: iter([1, 2])
    with pytest.raises(PipelineError, match="item source ran out"):
        profile(pipe, requests=5, warmup=0, traced=0, clock=fake_clock)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"requests": 0}, "requests must be an integer >= 1"),
        ({"warmup": -1}, "warmup must be an integer >= 0"),
        ({"traced": 1.5}, "traced must be an integer >= 0"),
        ({"sync": "never"}, "sync must be one of stage, request"),
        (
            {"request": 5},
            "profile: unknown option 'request'; the options are MeasurePlan's fields: requests,",
        ),
    ],
)
def test_bad_arguments(fake_clock, kwargs, match):
    pipe = toy_pipeline(fake_clock, {"parse": 1})
    with pytest.raises(ConfigError, match=match):
        profile(pipe, clock=fake_clock, **({"traced": 0} | kwargs))


def test_an_options_object_takes_keyword_overrides(fake_clock):
    pipe = toy_pipeline(fake_clock, {"parse": 1})
    options = MeasurePlan(requests=3, warmup=1, traced=0, clock=fake_clock)
    run = profile(pipe, options=options, requests=2)
    assert run.meta.timing.requests == 2 and run.meta.timing.warmup == 1
    with pytest.raises(ConfigError, match="requests must be an integer >= 1"):
        MeasurePlan(requests=0)


def test_cancel_stops_between_requests(fake_clock):
    class After:
        def __init__(self, n):
            self.calls, self.n = 0, n

        def is_set(self):
            self.calls += 1
            return self.calls > self.n

    pipe = toy_pipeline(fake_clock, {"parse": 1})
    with pytest.raises(Cancelled, match="cancelled after 3 of 10 requests"):
        profile(pipe, requests=10, warmup=0, traced=0, clock=fake_clock, cancel=After(3))


def test_progress_reports_each_request(fake_clock):
    calls = []
    pipe = toy_pipeline(fake_clock, {"parse": 1})
    profile(
        pipe,
        requests=3,
        warmup=1,
        traced=0,
        clock=fake_clock,
        progress=lambda d, t, p: calls.append((d, t, p)),
    )
    assert calls == [(1, 4, "timing"), (2, 4, "timing"), (3, 4, "timing"), (4, 4, "timing")]


def test_traced_run_writes_a_tensorboard_named_gzip_trace(tmp_path, fake_clock):
    import gzip
    import json
    import re

    from workbench.naming import stage_range_name

    pipe = toy_pipeline(FakeClock(), {"parse": 1, "forward": 1})
    run = profile(pipe, requests=2, warmup=0, traced=2)
    assert re.fullmatch(r".+\.\d+\.pt\.trace\.json\.gz", run.trace_path.name)
    events = json.loads(gzip.open(run.trace_path).read())["traceEvents"]
    names = {e.get("name") for e in events}
    assert stage_range_name("forward") in names and "ProfilerStep#1" in names
    trace = run.meta.trace.to_dict()
    memory = trace.pop("memory_by_stage")
    assert trace == {
        "requests": 2,
        "profiler_warmup": 1,
        "activities": ["cpu"],
        "failed_requests": 0,
        "failures": [],
        "with_stack": True,
        "record_shapes": False,
        "with_modules": False,
        "file": None,
        "stopped_by": None,
    }
    assert (
        set(memory) == {"parse", "forward"} and memory["forward"]["cuda_max_allocated_mb"] is None
    )
    scratch = run.trace_path.parent
    saved = run.save(tmp_path / "r")
    assert (saved / run.trace_path.name).is_file()
    assert not scratch.exists()  # the runner's temporary folder is gone once saved


def test_example_name_resolves_and_env_is_recorded():
    run = profile("tabular", PipelineConfig(batch_size=2), requests=3, warmup=1, traced=0)
    assert run.meta.pipeline == "tabular"
    assert run.meta.env.device == "cpu"
    assert run.meta.env.threads >= 1
    assert run.requests["ok"].all()
    assert isinstance(run.requests, pd.DataFrame)


def test_cuda_on_a_cpu_machine_is_a_clear_error():
    from workbench.device import cuda_available

    if cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ConfigError, match="no CUDA GPU is available"):
        profile("text", PipelineConfig(device="cuda"), requests=1, traced=0)


NOT_UTF8 = os.fsdecode(b"/data/caf\xe9.bin")  # a non-UTF-8 file name, as os.fsdecode gives it


def test_a_message_with_a_lone_surrogate_is_stored_escaped(fake_clock, tmp_path):
    # issue 35: such a message crashed profile and load while the tables were built; nothing saved
    pipe = Pipeline("files", items=lambda: itertools.count())

    def read(batch):
        fake_clock.advance(10)
        if batch[0] % 2:
            raise FileNotFoundError(f"{NOT_UTF8} missing")
        return batch

    pipe.add("read", read, describe=lambda out: {NOT_UTF8: 1} if out[0] == 2 else 1 / 0)
    run = profile(pipe, requests=4, warmup=0, traced=0, clock=fake_clock)
    saved = load_run(run.save(tmp_path / "run"))
    assert list(saved.requests["error_message"]) == [None, "/data/caf\\xe9.bin missing"] * 2
    assert list(saved.requests["attr./data/caf\\xe9.bin"].isna()) == [True, True, False, True]
    assert saved.meta.attributes.errors == {"read": "ZeroDivisionError: division by zero"}


def test_a_stage_name_a_run_cannot_store_is_refused_before_measuring(fake_clock):
    pipe = toy_pipeline(fake_clock, {"parse": 1, NOT_UTF8: 1})
    with pytest.raises(PipelineError, match="stage name '/data/caf\\\\udce9.bin' is not text"):
        profile(pipe, requests=1, traced=0, clock=fake_clock)


def test_a_paced_run_sends_on_its_schedule_after_a_closed_loop_reference(fake_clock):
    from workbench.runner import Pace

    pipe = toy_pipeline(fake_clock, {"parse": 1_000_000})  # 1 ms a request: capacity 1000/s
    run = profile(
        pipe,
        requests=20,
        warmup=2,
        traced=0,
        clock=fake_clock,
        pace=Pace(utilization=0.5, min_duration_s=0.5),
        sleep=lambda s: fake_clock.advance(round(s * 1e9)),
    )
    timing = run.meta.timing
    pacing = timing.pacing
    assert (timing.requests, timing.requests_asked, timing.stopped_by) == (900, 20, "p99_interval")
    assert len(run.requests) == 902 and run.requests["warmup"].sum() == 2  # the closed 20 are apart
    assert pacing["closed_loop"] == {"count": 20, "mean_ms": 1.0, "p50_ms": 1.0, "p99_ms": 1.0}
    assert (pacing["capacity_rps"], pacing["rate_rps"], pacing["process"]) == (
        1000.0,
        500.0,
        "poisson",
    )
    assert pacing["p99_over_closed_loop"] == 1.0 and pacing["wall_s"] > 0.5
    assert pacing["service"]["p99_ms"] == 1.0 < pacing["paced"]["p99_ms"]  # queueing: from due
    gaps = run.requests["start_ns"].diff().iloc[3:]
    assert gaps.min() > 0 and gaps.max() > 5_000_000  # idle gaps between requests


def test_a_paced_request_is_timed_from_its_due_time_its_send_lag_beside(fake_clock):
    from workbench.batching.arrivals import Arrivals
    from workbench.runner import Pace

    pipe = toy_pipeline(fake_clock, {"parse": 1_000_000})  # 1 ms a request, one at a time
    run = profile(
        pipe,
        requests=5,
        warmup=0,
        traced=0,
        clock=fake_clock,
        max_duration_s=1.0,
        pace=Pace(rate_rps=500, min_duration_s=1.0),
        sleep=lambda s: fake_clock.advance(round(s * 1e9)),
    )
    due = Arrivals("poisson", rate_rps=500, duration_s=1.0, seed=0).times_ns()
    due = due[: len(run.requests)].tolist()
    sent, done = [], 0  # a request due while the one before runs is sent when it ends (Lindley)
    for d in due:
        sent.append(max(d, done))
        done = sent[-1] + 1_000_000
    assert run.requests["start_ns"].tolist() == [d - due[0] for d in due]
    assert run.requests["lag_ns"].tolist() == [s - d for s, d in zip(sent, due)]
    assert run.requests["dur_ns"].tolist() == [s + 1_000_000 - d for s, d in zip(sent, due)]
    assert run.requests["lag_ns"].max() > 1_000_000  # some were sent late, and it shows
    assert run.meta.timing.pacing["service"]["p99_ms"] == 1.0


def test_a_stage_past_the_timeout_in_the_traced_run_stops_it_and_keeps_the_timing_run():
    """SIGALRM ends the traced run's stuck stage (a worker thread would leave torch.profiler blind)."""
    calls = itertools.count(1)

    def stuck_in_the_traced_run(batch):
        if next(calls) > 6:  # 2 warm-ups and 4 measured requests, then the traced run
            time.sleep(30)
        return batch

    pipe = Pipeline("stuck", items=lambda: itertools.count())
    pipe.add("stage", stuck_in_the_traced_run)
    started = time.monotonic()
    run = profile(pipe, requests=4, warmup=2, traced=2, timeout_s=0.5)
    assert time.monotonic() - started < 20  # not the stage's 30 s
    assert run.status == "incomplete: timeout" and len(run.requests) == 6
    trace = run.meta.trace
    assert trace.stopped_by == "timeout" and trace.failed_requests == 1 and trace.file is None
    message = "stage 'stage' of the traced run ran past the timeout of 0.5 s"
    assert [(f["type"], f["message"], f["count"]) for f in trace.failures] == [
        ("Timeout", message, 1)
    ]


def test_the_set_ups_garbage_is_collected_before_the_first_measured_request():
    """The warm-up leaves CPython owing a full collection (tests/support/set_up_garbage.py): it is
    paid after the warm-up, before the first measured request, and none falls inside the run
    (before: one did, in a measured request)."""
    planted = SetUpGarbage()
    profile(planted.build, requests=300, warmup=2, traced=0, sample_stacks=False)
    measured = planted.full[2:]
    assert measured[0] == planted.loaded + 1 and measured[-1] == measured[0]
