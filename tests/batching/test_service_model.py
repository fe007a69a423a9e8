import numpy as np
import pandas as pd
import pytest

from workbench.batching.service_model import ServiceModel, service_model_from_runs
from workbench.errors import ConfigError
from workbench.record import Run

from tests.support.service_quantiles import quantile_ns

MS = 1_000_000


def model():
    return ServiceModel.from_samples(
        {1: [1 * MS, 2 * MS, 3 * MS], 4: [4 * MS, 8 * MS], 8: [10 * MS]}
    )


def test_quantiles_interpolate_between_sizes():
    m = model()
    assert quantile_ns(m, 1, [0.0, 0.5, 1.0]).tolist() == [1 * MS, 2 * MS, 3 * MS]
    # size 2 is 1/3 of the way from 1 to 4: at u=0.5, 2 ms and 6 ms -> 2 + (6 - 2) / 3
    assert quantile_ns(m, 2, 0.5) == pytest.approx(2 * MS + 4 * MS / 3)
    assert quantile_ns(m, 6, 1.0) == pytest.approx(9 * MS)  # halfway between 8 ms and 10 ms
    assert m.mean_ns(4) == 6 * MS and m.mean_ns(6) == pytest.approx(8 * MS)
    assert m.capacity_rps(8) == pytest.approx(800.0) and m.capacity_rps(
        4, concurrency=2
    ) == pytest.approx(4 * 2 / 0.006)


def test_larger_than_measured_names_the_size():
    with pytest.raises(
        ConfigError, match="max_batch_size 16 .* largest measured batch size 8.*--batch-size 16"
    ):
        model().check(16)
    with pytest.raises(ConfigError, match="16"):
        quantile_ns(model(), 16, 0.5)


def test_smaller_than_measured_uses_the_smallest():
    m = ServiceModel.from_samples({4: [4 * MS]})
    assert quantile_ns(m, 1, 0.3) == 4 * MS and m.extrapolates_below(1)


def test_no_measurements():
    with pytest.raises(ConfigError, match="no measurements"):
        ServiceModel({})
    with pytest.raises(ConfigError, match="no measurements"):
        service_model_from_runs([])
    with pytest.raises(ConfigError, match="batch size 2"):
        ServiceModel.from_samples({2: []})


def fake_run(batch_size, durs, kind="profile", pipeline="toy", ok=None):
    n = len(durs)
    req = pd.DataFrame(
        {
            "request": range(n + 1),
            "warmup": [True] + [False] * n,
            "start_ns": 0,
            "dur_ns": [999 * MS] + list(durs),
            "ok": [True] + (ok or [True] * n),
            "error_stage": None,
            "error_type": None,
            "error_message": None,
            "batch_size": batch_size,
        }
    )
    meta = {"kind": kind, "pipeline": pipeline, "config": {"batch_size": batch_size}, "stages": []}
    return Run(meta=meta, requests=req, stages=pd.DataFrame())


def test_from_runs_pools_and_drops_warmup_and_failures(tmp_path):
    runs = [
        fake_run(1, [1 * MS, 3 * MS]),
        fake_run(1, [2 * MS]),
        fake_run(4, [5 * MS, 50 * MS], ok=[True, False]),
    ]
    runs[2].save(tmp_path / "bs4")
    m = service_model_from_runs([runs[0], runs[1], tmp_path / "bs4"])
    assert m.sizes == [1, 4] and m.pipeline == "toy"
    assert m.samples[1].tolist() == [1 * MS, 2 * MS, 3 * MS] and m.samples[4].tolist() == [5 * MS]


def test_from_runs_rejects_mixed_pipelines_and_load_runs():
    with pytest.raises(ConfigError, match="different pipelines"):
        service_model_from_runs([fake_run(1, [MS]), fake_run(2, [MS], pipeline="other")])
    with pytest.raises(ConfigError, match="'simulation' run"):
        service_model_from_runs([fake_run(1, [MS], kind="simulation")])
    with pytest.raises(ConfigError, match="no successful"):
        service_model_from_runs([fake_run(1, [MS], ok=[False])])
    assert np.isfinite(service_model_from_runs([fake_run(2, [MS])]).mean_ns(2))


def test_from_load_runs_one_sample_per_ok_batch():
    # batches: 0 (size 2, 3 ms), 1 (size 1, 1 ms), 2 (size 2, 5 ms, failed), 3..7 (size 1), -1 (never dispatched)
    batch = [0, 0, 1, 2, 2, 3, 4, 5, 6, 7, -1]
    service = [3, 3, 1, 5, 5, 2, 2, 2, 2, 2, 0]
    ok = [True] * 3 + [False, True] + [True] * 5 + [False]
    req = pd.DataFrame(
        {
            "request": range(11),
            "warmup": False,
            "start_ns": 0,
            "dur_ns": 0,
            "ok": ok,
            "batch": batch,
            "service_ns": [s * MS for s in service],
            "batch_size": 1,
        }
    )
    run = Run(
        meta={"kind": "load", "pipeline": "toy", "config": {"batch_size": 2}},
        requests=req,
        stages=pd.DataFrame(),
    )
    m = service_model_from_runs([run], min_batches=1)
    assert m.samples[1].tolist() == [1 * MS] + [2 * MS] * 5 and m.samples[2].tolist() == [3 * MS]
    assert service_model_from_runs([run], min_batches=2).sizes == [1]


def fingerprinted_run(batch_size, **changes):
    run = fake_run(batch_size, [MS, 2 * MS])
    fp = {
        "pipeline": "toy",
        "factory": "toy.py:build",
        "options": {"layers": 6},
        "precision": "fp32",
        "device": "cpu",
        "batch_size": batch_size,
        "threads": 2,
        "torch": "2.13.0",
        "workbench": "0.1.0",
        "host": {"cpu_model": "EPYC", "cores": 2},
        "model": {"params": 10, "hash": "ab"},
        "model_note": None,
    }
    run.meta = run.meta.replace(fingerprint=fp | changes)
    return run


def test_pooling_requires_fingerprints_equal_except_batch_size():
    m = service_model_from_runs([fingerprinted_run(1), fingerprinted_run(8)])
    assert m.sizes == [1, 8] and m.mixed == ()
    with pytest.raises(
        ConfigError,
        match=r"differ in precision: 'fp32' \(toy \? bs=1 \?\) vs 'int8' \(toy \? bs=8 \?\)",
    ):
        service_model_from_runs([fingerprinted_run(1), fingerprinted_run(8, precision="int8")])
    with pytest.raises(
        ConfigError,
        match=r"differ in options: \{'layers': 6\} .* vs \{'layers': 2\}.*--allow-mixed",
    ):
        service_model_from_runs(
            [fingerprinted_run(1), fingerprinted_run(2, options={"layers": 2}, threads=1)]
        )


def test_allow_mixed_pools_and_records_every_difference():
    m = service_model_from_runs(
        [fingerprinted_run(1), fingerprinted_run(2, options={"layers": 2}, threads=1)],
        allow_mixed=True,
    )
    assert m.mixed == (("options", {"layers": 6}, {"layers": 2}), ("threads", 2, 1))
    assert m.describe()["mixed"] == [
        {"field": "options", "a": {"layers": 6}, "b": {"layers": 2}},
        {"field": "threads", "a": 2, "b": 1},
    ]


def test_runs_without_a_fingerprint_are_compared_on_config_and_env():
    a, b = fake_run(1, [MS]), fake_run(8, [MS])
    a.meta = a.meta.replace(config=a.meta.config.to_dict() | {"precision": "fp32"})
    b.meta = b.meta.replace(config=b.meta.config.to_dict() | {"precision": "int8"})
    with pytest.raises(ConfigError, match="differ in precision: 'fp32'"):
        service_model_from_runs([a, b])


def test_a_paced_profile_calibrates_the_model_with_service_times_after_idle_gaps():
    from tests.conftest import FakeClock
    from workbench import Pipeline, profile
    from workbench.runner import Pace

    clock, last_end = FakeClock(), [None]

    def forward(batch):  # 1 ms back to back; 3 ms after an idle gap of over 1.5 ms (a cold cache)
        cold = last_end[0] is not None and clock.now - last_end[0] > 1_500_000
        clock.advance(3 * MS if cold else 1 * MS)
        last_end[0] = clock.now
        return batch

    pipe = Pipeline("toy", items=lambda: iter(range(10**6))).add("forward", forward)
    run = profile(
        pipe,
        requests=20,
        warmup=0,
        traced=0,
        clock=clock,
        pace=Pace(rate_rps=100.0, min_duration_s=1.0),
        sleep=lambda s: clock.advance(round(s * 1e9)),
    )
    assert run.meta.timing.pacing["closed_loop"]["p50_ms"] == 1.0
    paced = run.requests[~run.requests["warmup"]]
    assert paced["lag_ns"].max() > 0  # some were due while one ran: timed from the due time
    model = service_model_from_runs([run])
    service = paced["dur_ns"] - paced["lag_ns"]  # the service model's samples are from the send
    assert model.samples[1].tolist() == sorted(service) and np.median(model.samples[1]) == 3 * MS


def occupancy_run(concurrency=None):
    """Three batches of one request on one executor (ms): idle (hand-over 0.1), queued behind it
    (0.02 of turnaround after it), idle again (hand-over 0.05)."""
    req = pd.DataFrame(
        {
            "request": range(3),
            "warmup": False,
            "start_ns": 0,
            "dur_ns": 0,
            "ok": True,
            "batch": [0, 1, 2],
            "arrival_ns": [0, MS // 2, 5 * MS],
            "batch_wait_ns": 0,
            "queue_wait_ns": [MS // 10, 620_000, MS // 20],
            "service_ns": [MS, MS, 2 * MS],
            "batch_size": 1,
        }
    )
    meta = {"kind": "load", "pipeline": "toy", "config": {"batch_size": 1}}
    if concurrency is not None:
        meta["load"] = {
            "policy": {"max_batch_size": 1, "max_wait_ms": 0.0, "concurrency": concurrency}
        }
    return Run(meta=meta, requests=req, stages=pd.DataFrame())


def test_a_one_executor_load_run_gives_the_executors_occupancy_in_the_order_batches_ran():
    """Each batch from when the executor could take it (its close, or the batch before's end) to
    its end: 1.1 ms (hand-over 0.1 + 1), 1.02 (turnaround 0.02 + 1), 2.05; ``order`` their
    quantiles in the order they ran."""
    m = service_model_from_runs([occupancy_run()], min_batches=1)
    assert m.samples[1].tolist() == [1_020_000, 1_100_000, 2_050_000]
    assert m.order.tolist() == [0.5, 0.0, 1.0]


def test_with_more_executors_a_load_run_gives_the_pipeline_calls_own_time():
    m = service_model_from_runs([occupancy_run(concurrency=2)], min_batches=1)
    assert m.samples[1].tolist() == [MS, MS, 2 * MS] and m.order.tolist() == [0.25, 0.25, 1.0]


def spaced_run(idle: int, queued: int):
    """One executor: ``idle`` batches of 2 ms that found it idle (10 ms apart), then ``queued`` of
    1 ms, each arriving while the one before is served (no turnaround)."""
    arrival = [10 * MS * k for k in range(idle)]
    queue_wait = [0] * idle
    t0 = 10 * MS * idle
    arrival += [t0 + k * MS // 2 for k in range(queued)]
    queue_wait += [k * MS // 2 for k in range(queued)]  # batch k starts at t0 + k ms
    req = pd.DataFrame(
        {
            "request": range(idle + queued),
            "warmup": False,
            "start_ns": 0,
            "dur_ns": 0,
            "ok": True,
            "batch": range(idle + queued),
            "arrival_ns": arrival,
            "batch_wait_ns": 0,
            "queue_wait_ns": queue_wait,
            "service_ns": [2 * MS] * idle + [MS] * queued,
            "batch_size": 1,
        }
    )
    meta = {"kind": "load", "pipeline": "toy", "config": {"batch_size": 1}}
    return Run(meta=meta, requests=req, stages=pd.DataFrame())


def test_a_one_executor_load_run_splits_its_calls_by_the_executors_state_when_each_has_20():
    m = service_model_from_runs([spaced_run(20, 21)], min_batches=1)
    after_idle, back_to_back = m.states
    # the first queued batch found the executor idle (at t0 the last 2-ms call had ended)
    assert after_idle.samples[1].tolist() == [MS] + [2 * MS] * 20
    assert back_to_back.samples[1].tolist() == [MS] * 20 and len(m.samples[1]) == 41
    assert m.describe()["states"]["back_to_back"]["1"]["count"] == 20
    assert service_model_from_runs([spaced_run(18, 30)], min_batches=1).states is None  # 19 idle
