"""The interleaved runner: order, same items, warm-up, thread switches, exact ratios with a fake clock."""

import itertools

import numpy as np
import pytest
from tests.conftest import FakeClock, streaming_pipeline

import workbench
from workbench import Pipeline, PipelineConfig
from workbench.interleave import BLOCK, MIN_ROUNDS, REWARM, CompareOptions, compare, config_with
from workbench.errors import ConfigError


def recording_factory(clock: FakeClock, calls: list):
    """Stages advance the fake clock: parse 1000 ns; forward ``cost`` ns per call (option, default 10000)."""

    def build(config):
        pipe = Pipeline("toy", items=lambda: itertools.count())
        tag = config.options.get("tag", "A")

        def parse(batch):
            calls.append((tag, tuple(batch), config.threads and _threads()))
            clock.advance(1000)
            return batch

        def forward(batch):
            clock.advance(config.options.get("cost", 10_000))
            return batch

        pipe.add("parse", parse)
        pipe.add("forward", forward)
        return pipe

    return build


def _threads():
    import torch

    return torch.get_num_threads()


class QuietProbe:
    def __init__(self, noisy):
        self.noisy = noisy

    def start(self):
        return self

    def finish(self, torch_threads, e2e_ns):
        self.threads, self.e2e_count = torch_threads, len(e2e_ns)
        return {"noisy": self.noisy, "reasons": ["injected"], "fix": None}


def run(configs, calls, clock, **kw):
    kw.setdefault("noise_probe", QuietProbe(False))
    return compare(recording_factory(clock, calls), configs, clock=clock, resamples=200, **kw)


def test_exact_ratios_and_verdicts_with_a_fake_clock():
    clock, calls = FakeClock(), []
    c = run([{"cost": 10_000}, {"cost": 11_000, "tag": "B"}], calls, clock, requests=30, warmup=2)
    parse, forward = c.result["stages"]
    assert (
        forward["p50_ratio"] == 1.1
        and forward["p50_ci"] == [1.1, 1.1]
        and forward["verdict"] == "slower"
    )
    assert parse["p50_ratio"] == 1.0 and parse["verdict"] == "no detectable difference"
    assert c.result["end_to_end"]["p50_ratio"] == round(12_000 / 11_000, 4)
    assert c.result["configs"][1]["label"] == 'cost=11000,tag="B"'
    assert c.result["configs"][1]["config"]["options"] == {"cost": 11_000, "tag": "B"}
    assert set(c.samples.loc[c.samples["config"] == 1, "forward"]) == {11_000}
    assert len(c.samples) == 60 and c.result["noise"]["noisy"] is False


def test_rounds_run_one_block_per_config_in_the_seeded_order_on_the_same_items():
    clock, calls = FakeClock(), []
    c = run([{"tag": "A"}, {"tag": "B"}, {"tag": "C"}], calls, clock, requests=25, warmup=2, seed=7)
    warm, measured = calls[:6], calls[6:]
    assert [t for t, _, _ in warm] == ["A", "A", "B", "B", "C", "C"]
    rng = np.random.default_rng(7)
    expected = []
    for rnd in range(3):
        for k in rng.permutation(3).tolist():
            expected += ["ABC"[k]] * (BLOCK if rnd < 2 else 5)
    assert [t for t, _, _ in measured] == expected
    for (
        tag
    ) in "ABC":  # every configuration saw the same items, in the same order, after its warm-up
        assert [b for t, b, _ in measured if t == tag] == [(i,) for i in range(2, 27)]
    assert c.samples.groupby("config").size().tolist() == [25, 25, 25]
    assert len(c.result["comparisons"]) == 2 and c.result["comparisons"][1]["b"] == 2


def test_same_items_across_batch_sizes():
    clock, calls = FakeClock(), []
    run([{"batch_size": 1}, {"batch_size": 2, "tag": "B"}], calls, clock, requests=3, warmup=1)
    assert [b for t, b, _ in calls if t == "B"] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert [b for t, b, _ in calls if t == "A"] == [(0,), (1,), (2,), (3,)]


def test_a_thread_count_switch_is_warmed_up_again():
    pytest.importorskip("torch")
    clock, calls, probe = FakeClock(), [], QuietProbe(False)
    run(
        [{"threads": 1}, {"threads": 2, "tag": "B"}],
        calls,
        clock,
        requests=40,
        warmup=1,
        seed=3,
        noise_probe=probe,
    )
    assert (probe.threads, probe.e2e_count) == (2, 80)  # judged with the most threads any side used
    tags = [t for t, _, _ in calls]
    assert all(
        n == (1 if t == "A" else 2) for t, _, n in calls
    )  # each ran with its own thread count
    rng = np.random.default_rng(3)
    order = [k for _ in range(4) for k in rng.permutation(2).tolist()]
    switches = sum(1 for prev, cur in zip([1, *order], order) if prev != cur)  # B warmed up last
    assert switches > 0 and len(tags) == 2 * 1 + 2 * 40 + REWARM * switches


def test_the_noise_window_starts_after_every_warm_up():
    """torch.compile's workers and lazy initialisation run in the warm-up: they are not the machine's noise."""
    clock, calls = FakeClock(), []

    class CountingProbe(QuietProbe):
        def start(self):
            self.calls_before_start = len(calls)
            return self

    probe = CountingProbe(False)
    run([{"tag": "A"}, {"tag": "B"}], calls, clock, requests=20, warmup=3, noise_probe=probe)
    assert probe.calls_before_start == 2 * 3 and len(calls) == 2 * 3 + 2 * 20


def test_noisy_window_makes_verdicts_too_noisy():
    clock, calls = FakeClock(), []
    c = run(
        [{"cost": 10_000}, {"cost": 20_000}],
        calls,
        clock,
        requests=10,
        warmup=0,
        noise_probe=QuietProbe(True),
    )
    assert {e["verdict"] for e in c.result["stages"]} == {"too noisy to tell"}


def test_config_with_splits_built_in_keys_from_options():
    base = PipelineConfig(batch_size=4, options={"seed": 1})
    cfg = config_with(base, {"precision": "bf16", "threads": 2, "slow": 1.1})
    assert (cfg.batch_size, cfg.precision, cfg.threads, cfg.options) == (
        4,
        "bf16",
        2,
        {"seed": 1, "slow": 1.1},
    )


def test_refusals():
    clock, calls = FakeClock(), []
    with pytest.raises(ConfigError, match="at least two configurations"):
        run([{}], calls, clock)
    with pytest.raises(ConfigError, match="not a built Pipeline"):
        compare(Pipeline("p", [], items=[1]), [{}, {}])

    def two_shapes(config):
        pipe = Pipeline("toy", items=lambda: itertools.count())
        pipe.add("parse", lambda b: b)
        if config.options.get("extra"):
            pipe.add("more", lambda b: b)
        return pipe

    with pytest.raises(ConfigError, match="not comparable"):
        compare(two_shapes, [{}, {"extra": True}], noise_probe=False)


def test_an_options_object_measures_as_its_keywords_and_keywords_override_it():
    configs = [{"cost": 10_000}, {"cost": 11_000}]
    clock = FakeClock()
    opts = CompareOptions(
        requests=20, warmup=1, seed=3, resamples=200, clock=clock, noise_probe=QuietProbe(False)
    )
    by_object = compare(recording_factory(clock, []), configs, opts)
    by_keywords = run(configs, [], FakeClock(), requests=20, warmup=1, seed=3)
    assert by_object.result == by_keywords.result and by_object.result["requests"] == 20
    clock = FakeClock()
    overridden = compare(recording_factory(clock, []), configs, opts, clock=clock, requests=10)
    assert overridden.result["requests"] == 10 and opts.requests == 20
    with pytest.raises(ConfigError, match="resolution must be"):
        CompareOptions(resolution=0)


def test_workbench_compare_is_the_interleaved_compare_function():
    import workbench.interleave as module

    assert "compare" in workbench.__all__
    assert workbench.compare is module.compare


def test_configs_may_be_pipeline_configs_labelled_by_what_differs_from_the_base():
    clock, calls = FakeClock(), []
    base = PipelineConfig(options={"cost": 10_000})
    c = run([base, base.replace(batch_size=2)], calls, clock, base=base, requests=10, warmup=0)
    assert [x["label"] for x in c.result["configs"]] == ["base", "batch_size=2"]
    assert c.result["configs"][1]["config"]["batch_size"] == 2


def test_adaptive_run_length_stops_when_every_interval_is_narrower_than_the_resolution():
    # exact stage costs: every interval has width 0 at the first check (MIN_ROUNDS rounds)
    clock, calls = FakeClock(), []
    c = run([{"cost": 10_000}, {"cost": 13_000}], calls, clock, warmup=0)
    stopped = c.result["stopped"]
    assert stopped["by"] == "resolution" and stopped["rounds"] == MIN_ROUNDS
    assert stopped["resolution"] == 0.05 and stopped["widest"]["width"] == 0.0
    assert [x["requests"] for x in c.result["configs"]] == [MIN_ROUNDS * BLOCK] * 2
    assert c.result["requests"] == MIN_ROUNDS * BLOCK and c.result["stages"][1]["p50_ratio"] == 1.3


def jittery_factory(clock: FakeClock, spread: float):
    """forward costs 10 us x (1 + spread x U[0, 1)) from a seeded generator: intervals shrink slowly."""
    rng = np.random.default_rng(7)

    def build(config):
        pipe = Pipeline("toy", items=lambda: itertools.count())
        pipe.add("forward", lambda b: clock.advance(int(10_000 * (1 + spread * rng.random()))) or b)
        return pipe

    return build


def test_adaptive_run_length_stops_at_max_time_and_says_so():
    clock = FakeClock()
    c = compare(
        jittery_factory(clock, 5.0),
        [{}, {}],
        clock=clock,
        resamples=200,
        warmup=0,
        noise_probe=QuietProbe(False),
        max_time_s=0.05,
    )
    stopped = c.result["stopped"]
    assert (
        stopped["by"] == "max_time"
        and stopped["seconds"] >= 0.05
        and stopped["widest"]["width"] >= 0.05
    )
    assert stopped["rounds"] > MIN_ROUNDS  # the interval was still too wide at the first check


def test_a_fixed_request_count_is_not_adaptive():
    clock, calls = FakeClock(), []
    c = run([{}, {}], calls, clock, requests=25, warmup=0)
    assert c.result["stopped"] | {"seconds": None} == {
        "by": "requests",
        "rounds": 3,
        "seconds": None,
        "resolution": None,
        "max_time_s": None,
        "widest": None,
    }
    assert [x["requests"] for x in c.result["configs"]] == [25, 25]


def test_a_finite_item_source_ends_an_adaptive_run():
    clock, rng = FakeClock(), np.random.default_rng(3)

    def build(config):
        pipe = Pipeline(
            "toy", items=lambda: iter(range(400))
        )  # 40 rounds of one block per configuration
        pipe.add("forward", lambda b: clock.advance(int(10_000 * (1 + 5 * rng.random()))) or b)
        return pipe

    c = compare(
        build, [{}, {}], clock=clock, resamples=200, warmup=0, noise_probe=QuietProbe(False)
    )
    assert c.result["stopped"]["by"] == "items" and c.result["requests"] == 400


@pytest.mark.parametrize(
    "kw, message",
    [({"resolution": 0}, "resolution must be"), ({"max_time_s": -1}, "max_time_s must be")],
)
def test_bad_adaptive_settings_are_refused(kw, message):
    with pytest.raises(ConfigError, match=message):
        compare(jittery_factory(FakeClock(), 1.0), [{}, {}], **kw)


def test_an_undefined_interval_never_ends_the_rounds_and_the_report_stays_strict_json():
    import json

    clock = FakeClock()

    def build(config):
        pipe = Pipeline("toy", items=lambda: itertools.count())
        pipe.add("noop", lambda b: b)  # 0 ns on the fake clock: its ratio B/A is undefined
        pipe.add("forward", lambda b: clock.advance(10_000) or b)
        return pipe

    c = compare(
        build,
        [{}, {}],
        clock=clock,
        resamples=200,
        warmup=0,
        noise_probe=QuietProbe(False),
        max_time_s=0.02,
    )
    stopped = c.result["stopped"]
    assert stopped["by"] == "max_time" and stopped["widest"] == {
        "b": 1,
        "name": "noop",
        "width": None,
    }
    json.dumps(c.result, allow_nan=False)


def kv_factory(clock: FakeClock):
    """A streaming pipeline of 8 tokens whose decode steps grow 500 ns a position without ``kv_cache``."""

    def build(config):
        cached = config.options.get("kv_cache", True)
        return streaming_pipeline(clock, step_ns=1_000, growth_ns=0 if cached else 500, tokens=8)

    return build


def test_a_streaming_pipeline_compares_ttft_tpot_and_itl_with_intervals():
    clock = FakeClock()
    c = compare(
        kv_factory(clock),
        [{"kv_cache": False}, {"kv_cache": True}],
        clock=clock,
        requests=40,
        noise_probe=False,
        resamples=200,
    )
    tokens = c.result["tokens"]
    assert (tokens["requests"], tokens["gaps"]) == ([40, 40], [280, 280])
    ttft, tpot, itl = tokens["metrics"]
    assert [e["name"] for e in tokens["metrics"]] == ["ttft", "tpot", "itl"]
    # TPOT without the cache: steps 1,500 .. 4,500 ns, mean 3,000; with it 1,000
    assert tpot["p50_ratio"] == tpot["p99_ratio"] == 0.3333
    assert tpot["p50_ci"] == [0.3333, 0.3333] and tpot["verdict"] == "faster"
    assert (tpot["p50_a_ms"], tpot["p50_b_ms"]) == (0.003, 0.001)
    assert itl["p50_ratio"] == 0.3333 and itl["verdict"] == "faster"  # median gap 3,000 ns
    assert ttft["p50_ratio"] == 1.0 and ttft["verdict"] == "no detectable difference"
    assert list(c.samples["tpot"].unique()) == [3_000, 1_000]
