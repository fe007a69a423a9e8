"""RSS sampling every 10 requests and the steady-growth (leak) rule, with injected readings."""

from __future__ import annotations

import itertools
import json

import pytest

from tests.conftest import FakeClock, toy_pipeline
from workbench import Pipeline, profile
from workbench.memory import MB, MemorySampler, leak_suspected, memory_trend, rss_bytes


def readings(values_mb):
    it = iter(values_mb)
    return lambda: int(next(it) * MB)


def test_a_steady_linear_leak_is_flagged_with_exact_numbers():
    trend = memory_trend([0, 10, 20, 30], [100.0, 120.0, 140.0, 160.0])
    assert trend == {
        "samples_mb": [100.0, 120.0, 140.0, 160.0],
        "slope_mb_per_100": 200.0,
        "r2": 1.0,
        "growth_mb": 60.0,
        "leak_suspected": True,
    }


def test_one_jump_is_not_steady_growth():
    # slope 3 MB per request, R² = 1 - 3000/12000 = 0.75 (worked by hand), growth 100 MB
    trend = memory_trend([0, 10, 20, 30, 40], [100.0, 100.0, 100.0, 200.0, 200.0])
    assert (trend["slope_mb_per_100"], trend["r2"], trend["growth_mb"]) == (300.0, 0.75, 100.0)
    assert trend["leak_suspected"] is False


@pytest.mark.parametrize(
    "slope, r2, growth, flagged",
    [
        (1.5, 0.9, 51.0, True),
        (1.0, 0.9, 51.0, False),  # slope not above 1 MB per 100 requests
        (1.5, 0.8, 51.0, False),  # R² not above 0.8
        (1.5, 0.9, 50.0, False),  # not more than 50 MB in all
        (None, None, 60.0, False),  # too few samples to fit
    ],
)
def test_all_three_thresholds_must_be_exceeded(slope, r2, growth, flagged):
    assert leak_suspected(slope, r2, growth) is flagged


def test_flat_memory_has_no_r2_and_no_leak():
    trend = memory_trend([0, 10, 20], [50.0, 50.0, 50.0])
    assert (
        trend["slope_mb_per_100"],
        trend["r2"],
        trend["growth_mb"],
        trend["leak_suspected"],
    ) == (0.0, None, 0.0, False)


def test_sampler_reads_every_10_measured_requests_after_warmup():
    calls = []
    sampler = MemorySampler(lambda: calls.append(1) or 1_000_000 * len(calls), start=3)
    for done in range(0, 26):
        sampler.observe(done)
    assert sampler.requests == [0, 10, 20]  # after 3, 13 and 23 requests done
    assert sampler.summary()["samples_mb"] == [1.0, 2.0, 3.0]


def test_sampler_without_readings_gives_no_section():
    sampler = MemorySampler(lambda: None)
    sampler.observe(0)
    assert sampler.summary() is None


def test_rss_is_read_on_this_machine():
    value = rss_bytes()
    assert value is not None and value > 1_000_000


def test_profile_records_the_memory_section_from_injected_readings():
    clock = FakeClock()
    run = profile(
        toy_pipeline(clock, {"parse": 1}),
        requests=30,
        warmup=2,
        traced=0,
        clock=clock,
        read_rss=readings([100, 120, 140, 160]),
    )
    assert run.meta.memory.to_dict() == {
        "samples_mb": [100.0, 120.0, 140.0, 160.0],
        "slope_mb_per_100": 200.0,
        "r2": 1.0,
        "growth_mb": 60.0,
        "leak_suspected": True,
    }


def build_leaky(config):
    """Keeps 10 MB of every request alive while the pipeline lives (the issue's finding)."""
    pipe = Pipeline("leaky", items=lambda: itertools.count())
    kept = []  # per pipeline, not per module: the CLI imports this file as a second module

    @pipe.stage
    def forward(batch):
        kept.append(b"x" * 10_000_000)  # written, so resident
        return batch

    return pipe


def test_cli_flags_and_prints_a_real_10_mb_per_request_leak(tmp_path):
    from tests.support.cli import workbench

    out = tmp_path / "run"
    # a fresh process: a long test session's freed heap would absorb part of the growth
    done = workbench(
        *["profile", "--closed-loop", "--pipeline", "tests.test_memory:build_leaky"],
        *["--requests", "30", "--warmup", "0", "--traced", "0", "--out", out],
        timeout=300,
    )
    err = done.stderr
    code = done.returncode
    assert code == 0, err
    memory = json.loads((out / "run.json").read_text())["memory"]
    assert memory["leak_suspected"] is True and len(memory["samples_mb"]) == 4
    assert 280 < memory["growth_mb"] < 320 and 900 < memory["slope_mb_per_100"] < 1100
    assert "warning: memory grew" in err and "leak suspected" in err


def test_stage_memory_records_rss_growth_per_stage_and_skips_the_warmup_call():
    from workbench.memory import StageMemory

    readings = iter(
        [
            130_000_000,
            140_000_000,  # forward: +10 MB (the warm-up call reads nothing)
            140_000_000,
            141_000_000,
        ]
    )  # forward: +1 MB
    mem = StageMemory(read_rss=lambda: next(readings))
    with mem.measure("forward", counted=False):
        pass
    with mem.measure("forward"):
        pass
    with mem.measure("forward"):
        pass
    assert mem.summary() == {
        "forward": {
            "rss_delta_mb_mean": 5.5,
            "rss_delta_mb_max": 10.0,
            "cuda_max_allocated_mb": None,
        }
    }


def test_stage_memory_reads_the_cuda_peak_after_a_reset():
    from workbench.memory import StageMemory

    class FakeCuda:
        resets = 0

        def reset_peak_memory_stats(self, device):
            FakeCuda.resets += 1

        def max_memory_allocated(self, device):
            return 64_000_000

    class FakeTorch:
        cuda = FakeCuda()

    mem = StageMemory(FakeTorch(), "cuda:0", read_rss=lambda: None)
    with mem.measure("forward"):
        pass
    assert FakeCuda.resets == 1
    assert mem.summary()["forward"] == {
        "rss_delta_mb_mean": None,
        "rss_delta_mb_max": None,
        "cuda_max_allocated_mb": 64.0,
    }
