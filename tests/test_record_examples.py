"""scripts/record_examples.py: the explorer's precision grid is in the plan, and a noisy run is not saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_script, toy_pipeline
from workbench import profile as real_profile
from workbench.widgets.latency import BATCH_SIZES

REPO = Path(__file__).resolve().parents[1]
rec = load_script(REPO / "scripts" / "record_examples.py", "record_examples_script")
NOISY = {"noisy": True, "reasons": ["other processes used 1.7 of 2 cores during the run"]}


def test_the_cpu_plan_records_text_in_every_precision_at_batch_1_to_16():
    plan = rec.CPU_RUNS + rec.CPU_SERVICE_RUNS + rec.CPU_PRECISION_RUNS
    names = {rec.run_name(e, "cpu", bs, p, o) for e, bs, p, o, *_ in plan}
    grid = [b for b in BATCH_SIZES if b <= 16]
    assert grid == [1, 2, 4, 8, 16]
    for precision in ("fp32", "bf16", "int8"):
        assert {f"text-cpu-bs{b}-{precision}" for b in grid} <= names


@pytest.mark.parametrize("noise, saved", [(NOISY, []), ({"noisy": False}, ["toy-cpu-bs1-fp32"])])
def test_a_run_its_noise_check_flags_is_not_saved(tmp_path, monkeypatch, fake_clock, noise, saved):
    def profile(example, config, **_options):
        pipe = toy_pipeline(fake_clock, {"parse": 1_000})
        run = real_profile(pipe, config, clock=fake_clock, requests=3, warmup=1, traced=0)
        run.meta = run.meta.replace(noise=noise)
        return run

    monkeypatch.setattr(rec, "profile", profile)
    plan = [("toy", 1, "fp32", {}, 3)]
    assert rec.record(plan, "cpu", tmp_path, traced=0, quick=False) == saved
    assert sorted(p.name for p in tmp_path.iterdir()) == saved
    assert rec.record(plan, "cpu", tmp_path / "kept", 0, False, allow_noisy=True) == [
        "toy-cpu-bs1-fp32"
    ]
