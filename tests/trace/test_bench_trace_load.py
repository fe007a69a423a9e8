"""The trace-load benchmark runs end to end on a tiny synthetic trace."""
import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_trace_load.py"


@pytest.mark.slow
def test_bench_smoke(tmp_path, capsys):
    pytest.importorskip("hta")
    spec = importlib.util.spec_from_file_location("bench_trace_load", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--smoke", "--json", str(tmp_path / "out.json")]) == 0
    rows = json.loads((tmp_path / "out.json").read_text())["rows"]
    assert rows[0]["workbench"]["ok"], rows[0]["workbench"]["error"]
    assert rows[0]["orjson"]["ok"] and rows[0]["workbench"]["peak_mb"] > 0
    assert "HTA/wb" in capsys.readouterr().out
