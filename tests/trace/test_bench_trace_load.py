"""The trace-load benchmark runs end to end on a tiny synthetic trace and reports the three ratios."""

import json
from pathlib import Path

import pytest

from tests.conftest import load_script

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_trace_load.py"


def load_bench():
    return load_script(BENCH, "bench_trace_load")


def test_ratios_and_goals_from_injected_figures():
    bench = load_bench()
    wb = {"ok": True, "wall_s": 1.0, "peak_mb": 180.0, "above_base_mb": 60.0}
    hta = {"ok": True, "wall_s": 3.5, "peak_mb": 300.0, "above_base_mb": 150.0}
    orjson = {"ok": True, "wall_s": 0.4, "peak_mb": 230.0, "above_base_mb": 215.0}
    out = bench.ratios(wb, hta, orjson)
    assert (
        out["speedup_vs_hta"],
        out["time_vs_orjson"],
        out["memory_vs_hta"],
        out["peak_vs_hta"],
    ) == (3.5, 2.5, 0.4, 0.6)
    assert out["goals_met"] == {
        "3x_faster_than_hta": True,
        "within_2x_of_orjson": False,
        "half_hta_memory": True,
    }
    with_memory_child = bench.ratios(
        wb, hta, orjson, {"ok": True, "wall_s": 1.2, "peak_mb": 170.0, "above_base_mb": 30.0}
    )
    assert (with_memory_child["speedup_vs_hta"], with_memory_child["memory_vs_hta"]) == (3.5, 0.2)
    failed = bench.ratios(wb, {"ok": False, "wall_s": 2.0}, orjson)
    assert failed["speedup_vs_hta"] is None and failed["goals_met"]["3x_faster_than_hta"] is None


@pytest.mark.slow
def test_bench_smoke(tmp_path, capsys):
    pytest.importorskip("hta")
    bench = load_bench()
    assert bench.main(["--smoke", "--json", str(tmp_path / "out.json")]) == 0
    rows = json.loads((tmp_path / "out.json").read_text())["rows"]
    wb = rows[0]["workbench"]
    assert wb["ok"], wb["error"]
    assert rows[0]["orjson"]["ok"] and wb["peak_mb"] > wb["base_mb"] > 0 and wb["above_base_mb"] > 0
    memory = rows[0]["workbench_memory"]
    assert memory["ok"], memory["error"]
    assert memory["base_mb"] > wb["base_mb"]  # its baseline is taken after the imports
    assert rows[0]["path"] == "synthetic_0.2mb.json"  # no absolute paths in the results
    assert {"speedup_vs_hta", "time_vs_orjson", "memory_vs_hta"} <= set(rows[0])
    assert "HTA/wb" in capsys.readouterr().out
