"""One worker process per configuration: a factory's process-wide state stays in its own process.

The factories are module-level functions, so a worker process rebuilds them from ``tests.test_interleave_workers``.
"""

import gc
import itertools
import time

import pytest

import workbench.interleave_workers as workers
from tests import hanging
from tests.test_interleave import QuietProbe, recording_factory
from tests.conftest import FakeClock
from workbench import Pipeline
from workbench.errors import ConfigError, PipelineError
from workbench.interleave import compare
from workbench.interleave_workers import recipe_of

_CACHE: dict = {}


def gc_sensitive(config) -> Pipeline:
    """``allocate`` keeps 20,000 small lists alive per request beside 300,000 long-lived ones: the cyclic
    collector runs about 28 times per request while it is on. Option ``gc_off`` turns it off, process-wide."""
    if config.options.get("gc_off"):
        gc.disable()
    heap = [[i] for i in range(300_000)]
    pipe = Pipeline("gc", items=lambda: itertools.count())
    pipe.add("allocate", lambda batch: len([[i, i] for i in range(20_000)]) + len(heap) * 0)
    return pipe


def cached_model(config) -> Pipeline:
    """A factory that caches what it built, as notebooks do: only the first build reads ``size``."""
    if "model" not in _CACHE:
        _CACHE["model"] = list(range(config.options["size"]))
    model = _CACHE["model"]
    pipe = Pipeline("cached", items=lambda: itertools.count())
    pipe.add("forward", lambda batch: [len(model)] * len(batch))
    return pipe


@pytest.fixture(autouse=True)
def collector_on():
    yield
    gc.enable()  # a one-process comparison of gc_sensitive turns it off here


def test_a_factory_that_disables_gc_in_one_configuration_runs_in_workers():
    # The verdict itself is not asserted: beside the suite the p50 ratio of this pair ranged 0.63-1.00
    # between runs (the collector's cost in A's process varies), so a timed assertion would flake;
    # test_a_configurations_gc_disable_stays_in_its_own_process checks the isolation exactly.
    result = compare(
        gc_sensitive,
        [{}, {"gc_off": True}],
        requests=100,
        warmup=5,
        noise_probe=False,
        resamples=500,
    ).result
    assert result["processes"] == "one per configuration"
    assert result["processes_note"] is None
    assert gc.isenabled()  # nothing the factories did reached this process
    assert result["end_to_end"]["p50_verdict"] != "slower"
    assert [c["requests"] for c in result["configs"]] == [100, 100]


def test_options_are_checked_against_each_configurations_own_factory():
    # in one process the second build found the cache filled and never read its size: refused
    with pytest.raises(ConfigError, match="never read"):
        compare(cached_model, [{"size": 3}, {"size": 5}], requests=10, warmup=1, processes=False)
    _CACHE.clear()
    result = compare(
        cached_model, [{"size": 3}, {"size": 5}], requests=10, warmup=1, noise_probe=False
    ).result
    assert result["processes"] == "one per configuration"
    assert [c["failed"] for c in result["configs"]] == [0, 0]
    # each worker's own model: A answers 3, B 5, for every item
    assert result["outputs"]["max_abs_error"] == 2.0
    assert "model" not in _CACHE  # built in the workers, not here


def test_an_unknown_option_is_still_refused_by_the_worker_that_built_it():
    with pytest.raises(ConfigError, match=r"configuration size=5,typo=1: .*'typo'"):
        compare(cached_model, [{"size": 3}, {"size": 5, "typo": 1}], requests=10, warmup=1)


def test_a_factory_no_worker_can_rebuild_runs_in_one_process_and_says_why():
    clock = FakeClock()
    result = compare(
        recording_factory(clock, []),
        [{}, {"cost": 20_000}],
        requests=20,
        warmup=1,
        clock=clock,
        noise_probe=QuietProbe(False),
        resamples=200,
    ).result
    assert result["processes"] == "one"
    assert "cannot be rebuilt in a worker process" in result["processes_note"]
    assert "reaches the others" in result["processes_note"]
    with pytest.raises(ConfigError, match=r"processes=True\): factory .*build cannot be rebuilt"):
        compare(recording_factory(clock, []), [{}, {}], processes=True)


def test_recipes():
    assert recipe_of("tabular") == "example:tabular"
    assert recipe_of(gc_sensitive) == "tests.test_interleave_workers:gc_sensitive"
    assert recipe_of(lambda config: None) is None
    assert recipe_of(recording_factory(FakeClock(), [])) is None


def test_a_worker_that_does_not_answer_is_killed_and_named(monkeypatch):
    monkeypatch.setattr(workers, "REPLY_TIMEOUT_S", 3.0)
    started = time.monotonic()
    # configuration B's forward blocks for 60 s on item 15: in its second block of 10 after 2 warm-ups
    with pytest.raises(
        PipelineError,
        match=r"configuration hang=\[15\]: its worker process did not "
        r"answer within 3 s during round request 12; killed",
    ):
        compare(hanging.build, [{}, {"hang": [15]}], requests=20, warmup=2, noise_probe=False)
    assert time.monotonic() - started < 40  # not the stage's 60 s


def gc_state(config) -> Pipeline:
    """Answers whether the collector is on in the process running it; option ``gc_off`` turns it off there."""
    if config.options.get("gc_off"):
        gc.disable()
    pipe = Pipeline("gc_state", items=lambda: itertools.count())
    pipe.add("probe", lambda batch: [float(gc.isenabled())] * len(batch))
    return pipe


def test_a_configurations_gc_disable_stays_in_its_own_process():
    result = compare(
        gc_state, [{}, {"gc_off": True}], requests=20, warmup=2, noise_probe=False
    ).result
    assert gc.isenabled()
    # A's process answered 1.0 (collector on) for every item, B's 0.0: in one process both say 0.0
    assert result["outputs"]["max_abs_error"] == 1.0
