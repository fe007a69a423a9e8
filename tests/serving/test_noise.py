"""The served run's noise: the local server's CPU is not "other processes"; a lagging generator is a reason."""

from workbench.noise import assess
from workbench_serve.loadrun import served_noise

QUIET = {"noisy": None, "reasons": ["not measured on this OS"], "fix": None}


def readings(other_cores):
    return assess(
        {
            "load_before_1m": 0.5,
            "load_after_1m": 0.6,
            "other_cores": other_cores,
            "steal_pct": 0.0,
            "cores": 2,
            "torch_threads": None,
            "governor": None,
            "duration_s": 10.0,
        }
    )


def test_server_cpu_is_taken_out_of_other_processes():
    noisy_by_server = readings(0.6)
    assert noisy_by_server["noisy"] is True
    out = served_noise(
        noisy_by_server, {"p50_ms": 0.1, "p99_ms": 0.5, "max_ms": 2.0}, server_cpu_s=5.0
    )
    assert out["noisy"] is False and out["other_cores"] == 0.1 and out["server_cores"] == 0.5
    assert out["generator_lag_p99_ms"] == 0.5


def test_generator_lag_p99_of_1_ms_marks_the_run_noisy_with_the_lag_as_a_reason():
    out = served_noise(
        readings(0.0), {"p50_ms": 0.2, "p99_ms": 1.25, "max_ms": 7.5}, server_cpu_s=None
    )
    assert out["noisy"] is True
    assert out["reasons"] == [
        "the load generator fell behind its schedule: lag p99 1.250 ms (max 7.500 ms) >= 1 ms: "
        "the client could not hold this rate here (a busy machine, or a rate above what it can send)"
    ]
    assert "lower --rate" in out["fix"]


def test_lag_rule_applies_where_the_machine_was_not_measured():
    assert served_noise(QUIET, {"p50_ms": 0.0, "p99_ms": 0.1, "max_ms": 0.1}, None)["noisy"] is None
    out = served_noise(QUIET, {"p50_ms": 0.0, "p99_ms": 3.0, "max_ms": 3.0}, None)
    assert out["noisy"] is True and len(out["reasons"]) == 1
