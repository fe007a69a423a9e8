import json


from workbench.analysis.trace_report import analyze
from workbench.trace import load_trace
from tests.support.synthetic import TraceBuilder, example_trace

REQUIRED = {
    "kernels": {"count", "total_us", "under_10us", "busy_us"},
    "memcpy": {"count", "total_us", "bytes", "by_kind", "by_kind_and_host_memory"},
    "memset": {"count", "total_us"},
    "launches": {"count", "total_us", "graph_count"},
    "launch_pairs": {"count", "cpu_over_50us", "delay_over_100us", "gpu_shorter_than_cpu"},
    "gpu": {"span_us", "busy_us", "idle_us", "idle_fraction"},
}
BREAKDOWN_KEYS = {
    "step",
    "kernel_us",
    "memcpy_us",
    "memset_us",
    "communication_us",
    "runtime_us",
    "dataloader_us",
    "cpu_exec_us",
    "other_us",
    "total_us",
}


def check_shape(report):
    for section, keys in REQUIRED.items():
        assert keys <= set(report[section]), section
    assert {"HtoD", "DtoH", "DtoD"} <= set(report["memcpy"]["by_kind"])
    assert all(
        {"name", "dur_us", "kernel_count", "kernel_us", "memcpy_us", "memset_us"} <= set(s)
        for s in report["steps"]
    )
    assert all(BREAKDOWN_KEYS <= set(s) for s in report["step_breakdown"])
    json.dumps(report, allow_nan=False)


def test_example_report_exact(tmp_path):
    r = analyze(example_trace().write(tmp_path / "t.json"))
    check_shape(r)
    assert r["kernels"] == r["kernels"] | {
        "count": 6,
        "total_us": 30.0,
        "under_10us": 5,
        "busy_us": 30.0,
    }
    assert r["memcpy"]["by_kind_and_host_memory"]["HtoD Pageable"] == {
        "count": 1,
        "total_us": 12.0,
        "bytes": 1_200_000,
        "gb_per_s": 100.0,
    }
    assert (r["launches"]["count"], r["launches"]["graph_count"], r["launch_pairs"]["count"]) == (
        2,
        1,
        4,
    )
    assert r["gpu"]["span_us"] == 571.0 and r["gpu"]["busy_us"] == 40.0
    assert [s["name"] for s in r["steps"]] == ["ProfilerStep#1", "ProfilerStep#2"]
    assert [s["step"] for s in r["step_breakdown"]] == [1, 2]
    assert r["stages"][0]["stage"] == "forward" and r["stages"][0]["transfer_bound"]


def test_old_schema_gives_the_same_figures(tmp_path):
    new = analyze(example_trace().write(tmp_path / "new.json"))
    old_trace = load_trace(example_trace(schema="2021").write(tmp_path / "old.json.gz"))
    assert old_trace.meta["schema"] == "2021"
    old = analyze(old_trace)
    for key in (
        "kernels",
        "memcpy",
        "memset",
        "launches",
        "launch_pairs",
        "gpu",
        "steps",
        "step_breakdown",
        "stages",
    ):
        assert old[key] == new[key], key


def test_cpu_only_trace_has_null_gpu_figures(tmp_path):
    b = TraceBuilder().op("aten::add", 0, 5_000)
    r = analyze(b.write(tmp_path / "t.json"))
    check_shape(r)
    assert r["gpu"] == r["gpu"] | {
        "span_us": None,
        "busy_us": None,
        "idle_us": None,
        "idle_fraction": None,
    }
    assert (r["kernels"]["count"], r["kernels"]["busy_us"], r["memcpy"]["bytes"]) == (0, None, None)
    assert r["steps"] == [] and [s["step"] for s in r["step_breakdown"]] == ["all"]
    assert r["trace"]["platform"] == "cpu"


def test_rocm_names(tmp_path):
    r = analyze(example_trace(rocm=True).write(tmp_path / "t.json"))
    assert r["trace"]["platform"] == "rocm"
    assert r["launches"]["count"] == 2 and r["launches"]["graph_count"] == 1
    assert "HtoD Host" in r["memcpy"]["by_kind_and_host_memory"]
    assert r["launch_pairs"]["count"] == 0  # HTA's launch-pair names are CUDA's
    assert [s["name"] for s in r["sync_calls"]] == ["hipStreamSynchronize"]
