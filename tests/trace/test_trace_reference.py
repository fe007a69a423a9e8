"""analyze() on the real GPU traces of ../shared/traces agrees with REFERENCE.json:
counts exactly, durations and bytes within 0.01 %."""

import json
from pathlib import Path

import pytest

from workbench.analysis.trace_report import analyze

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
REL = 1e-4


def _reference() -> dict:
    if not (SHARED / "REFERENCE.json").is_file():
        pytest.skip("../shared/traces is absent")
    return json.loads((SHARED / "REFERENCE.json").read_text())


def _names() -> list[str]:
    path = SHARED / "REFERENCE.json"
    if not path.is_file():
        return ["(absent)"]
    return sorted(k for k in json.loads(path.read_text()) if k != "definitions")


def close(actual, expected):
    if expected is None:
        return actual is None
    return actual == pytest.approx(expected, rel=REL, abs=1e-9)


@pytest.fixture(scope="module")
def reports():
    return {}


@pytest.mark.parametrize("name", _names())
def test_trace_matches_reference(name, reports):
    ref = _reference()[name]["figures"]
    r = analyze(SHARED / name)
    k = r["kernels"]
    assert k["count"] == ref["kernel_count"]
    assert close(k["total_us"], ref["kernel_dur_us"])
    assert k["under_10us"] == ref["kernels_lt_10us"]
    assert close(k["busy_us"], ref["kernel_busy_us"])
    _check_memcpy(r["memcpy"], ref["memcpy"])
    assert r["memset"]["count"] == ref["memset"]["count"]
    assert close(r["memset"]["total_us"], ref["memset"]["dur_us"])
    assert r["launches"]["count"] == ref["launch_calls"]["count"]
    assert close(r["launches"]["total_us"], ref["launch_calls"]["dur_us"])
    assert r["launches"]["graph_count"] == ref["graph_launch_calls"]["count"]
    _check_pairs(r["launch_pairs"], ref["launch_pairs"])
    _check_gpu(r["gpu"], ref)
    _check_steps(r["steps"], ref["profiler_steps"])


def _check_memcpy(m, ref):
    assert m["count"] == ref["count"]
    assert close(m["total_us"], ref["dur_us"])
    assert close(m["bytes"], ref["bytes"])
    assert set(m["by_kind"]) == set(ref["by_kind"])
    for kind, row in ref["by_kind"].items():
        got = m["by_kind"][kind]
        assert (
            got["count"] == row["count"]
            and close(got["total_us"], row["dur_us"])
            and close(got["bytes"], row["bytes"])
        )
    assert set(m["by_kind_and_host_memory"]) == set(ref["by_kind_and_host_memory"])
    for key, row in ref["by_kind_and_host_memory"].items():
        got = m["by_kind_and_host_memory"][key]
        assert (
            got["count"] == row["count"]
            and close(got["total_us"], row["dur_us"])
            and close(got["bytes"], row["bytes"])
        )


def _check_pairs(p, ref):
    assert p["count"] == ref["pairs"]
    assert p["cpu_over_50us"] == ref["cpu_dur_gt_50us"]
    assert p["delay_over_100us"] == ref["launch_delay_gt_100us"]
    assert p["gpu_shorter_than_cpu"] == ref["gpu_dur_lt_cpu_dur"]
    assert close(p["cpu_us"], ref["cpu_dur_sum_us"]) and close(p["gpu_us"], ref["gpu_dur_sum_us"])
    assert close(p["launch_delay_us"], ref["launch_delay_sum_us"])


def _check_gpu(g, ref):
    span = ref["gpu_span"]
    assert close(g["span_us"], None if span is None else span["dur_us"])
    assert close(g["busy_us"], ref["gpu_busy_us"])
    assert close(g["idle_us"], ref["gpu_idle_us"])
    assert close(g["idle_fraction"], ref["gpu_idle_fraction"])


def _check_steps(steps, ref):
    assert [s["name"] for s in steps] == [s["name"] for s in ref]
    for got, want in zip(steps, ref):
        assert close(got["dur_us"], want["dur_us"])
        assert got["kernel_count"] == want["launched_kernel_count"]
        assert close(got["kernel_us"], want["launched_kernel_dur_us"])
        assert close(got["memcpy_us"], want["launched_memcpy_dur_us"])
        assert close(got["memset_us"], want["launched_memset_dur_us"])


@pytest.mark.parametrize("name", _names())
def test_step_breakdown_sums_to_step_time(name):
    _reference()
    for row in analyze(SHARED / name)["step_breakdown"]:
        parts = sum(
            row[f"{c}_us"]
            for c in (
                "kernel",
                "memcpy",
                "memset",
                "communication",
                "runtime",
                "dataloader",
                "cpu_exec",
                "other",
            )
        )
        assert parts == pytest.approx(row["total_us"], abs=1e-6)
