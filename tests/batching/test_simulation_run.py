"""A simulation is a run: ``simulate --out DIR`` writes a kind-"simulation" run folder that ``show`` reads."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np

from workbench.batching.policy import BatchPolicy
from workbench.batching.summary import simulation_run
from workbench.batching.service_model import ServiceModel
from workbench.batching.simulator import simulate
from workbench.cli import main
from workbench.record import load_run

MS = 1_000_000


def test_simulation_run_tables_exact(tmp_path):
    # Deterministic 2 ms service at size 1, arrivals every 5 ms, no waiting: each request waits 0 and is served in 2 ms.
    sim = simulate(
        ServiceModel.from_samples({1: [2 * MS]}),
        np.arange(4, dtype=np.int64) * 5 * MS,
        BatchPolicy(1, 0),
    )
    run = simulation_run(sim, "toy", ["a", "b"], "2026-01-01T00:00:00+00:00")
    assert run.kind == "simulation" and run.stage_names == ["batch_wait", "queue_wait", "service"]
    assert run.requests["start_ns"].tolist() == [0, 5 * MS, 10 * MS, 15 * MS]
    assert run.requests["dur_ns"].tolist() == [2 * MS] * 4 and run.requests["ok"].all()
    assert run.stages[run.stages["request"] == 1][
        ["stage", "start_ns", "dur_ns"]
    ].values.tolist() == [
        ["batch_wait", 5 * MS, 0],
        ["queue_wait", 5 * MS, 0],
        ["service", 5 * MS, 2 * MS],
    ]
    back = load_run(run.save(tmp_path / "sim"))
    assert back.meta.simulation.service_runs == ["a", "b"] and back.meta.simulation.stable is True
    assert back.meta.config.batch_size == 1 and back.requests["dur_ns"].tolist() == [2 * MS] * 4


def cli(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def test_simulate_out_then_show(tmp_path):
    from workbench.analysis.budget import budget

    services = [str(tmp_path / f"bs{b}") for b in (1, 2)]
    from tests.conftest import FakeClock, toy_pipeline
    from workbench import PipelineConfig, profile

    for b, path in zip((1, 2), services):
        clock = FakeClock()
        profile(
            toy_pipeline(clock, {"forward": 1_000_000 * b}),
            PipelineConfig(batch_size=b),
            requests=5,
            warmup=0,
            traced=0,
            clock=clock,
            max_duration_s=None,
        ).save(path)
    rc, out = cli(
        [
            "simulate",
            "--service",
            *services,
            "--rate",
            "100",
            "--max-batch-size",
            "2",
            "--max-wait-ms",
            "0",
            "--requests",
            "50",
            "--json",
            "--out",
            str(tmp_path / "sim"),
        ]
    )
    assert rc == 0 and json.loads(out)["run_dir"] == str(tmp_path / "sim")
    rc, shown = cli(["show", str(tmp_path / "sim"), "--json"])
    report = json.loads(shown)
    assert (
        rc == 0
        and report["kind"] == "simulation"
        and [s["name"] for s in report["stages"]] == ["batch_wait", "queue_wait", "service"]
    )
    assert (
        budget(load_run(tmp_path / "sim")).items() <= report.items()
        and report["end_to_end"]["count"] == 50
    )
    assert report["unattributed"]["max_ms"] == 0.0
    rc, _ = cli(
        [
            "simulate",
            "--service",
            *services,
            "--rate",
            "100",
            "--requests",
            "5",
            "--out",
            str(tmp_path / "sim"),
        ]
    )
    assert rc == 2  # an existing --out is refused
