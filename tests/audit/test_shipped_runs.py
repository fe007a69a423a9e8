"""The audit on the shipped runs finds what each run was recorded to show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.audit.report import round_timeout_ms, timeout_estimate
from workbench.audit.report import audit
from workbench.cli import main
from workbench.record import load_run

RUNS = Path(__file__).resolve().parents[2] / "data" / "runs"


@pytest.mark.parametrize(
    "run, kind",
    [
        ("tabular-cpu-bs1-fp32", "feature_io"),
        ("text-cpu-bs1-fp32", "compute"),
        ("text-cpu-bs8-fp32", "compute"),
        ("image-cpu-bs1-fp32", "preprocess"),
        ("text-cuda-bs1-fp32", "launch"),
        ("image-cuda-bs64-fp32-pageable", "transfer"),
    ],
)
def test_expected_finding_on_each_shipped_run(run, kind):
    doc = audit([load_run(RUNS / run)])
    assert kind in [f["kind"] for f in doc["runs"][0]["findings"]]


def test_json_shape_and_sla(capsys):
    assert main(["audit", str(RUNS / "image-cpu-bs1-fp32"), "--sla-ms", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    entry = doc["runs"][0]
    assert entry["run"].endswith("image-cpu-bs1-fp32") and entry["sla_ms"] == 2
    from workbench.analysis.budget import budget

    run = load_run(RUNS / "image-cpu-bs1-fp32")
    p99 = budget(run)["end_to_end"]["p99_ms"]
    top_share = max(budget(run)["tail"]["sets"]["slowest_1pct"]["shares"].values())
    verb = "misses" if p99 > 2 else "meets"
    assert entry["summary"].startswith(
        f"p99 {p99:.3g} ms {verb} the 2 ms SLA; {top_share:.0%} of the slowest 1 % is "
    )
    f = entry["findings"][0]
    assert set(f) >= {"kind", "stage", "evidence", "actions"} and f["actions"]


def test_bad_input_exits_2(tmp_path, capsys):
    assert main(["audit", str(tmp_path / "missing"), "--json"]) == 2
    assert main(["audit", str(RUNS / "image-cpu-bs1-fp32"), "--sla-ms", "-1", "--json"]) == 2


def test_timeout_estimate_cuts_only_the_stage_over_the_timeout():
    run = load_run(RUNS / "tabular-cpu-bs1-fp32")
    import numpy as np

    est = timeout_estimate(run, "hydrate", 0.2)
    req = run.requests[~run.requests["warmup"] & run.requests["ok"]].set_index("request")
    hydrate = (
        run.stages[run.stages["stage"] == "hydrate"]
        .set_index("request")["dur_ns"]
        .reindex(req.index)
    )
    cut = req["dur_ns"] - (hydrate - 200_000).clip(lower=0)
    assert est["estimate"] is True
    assert est["timed_out_share"] == pytest.approx(float((hydrate > 200_000).mean()))
    assert est["p99_ms"] == pytest.approx(float(np.percentile(cut, 99)) / 1e6)
    assert est["p99_ms"] <= float(np.percentile(req["dur_ns"], 99)) / 1e6


@pytest.mark.parametrize(
    "value, expected", [(0.37, 0.5), (4.1, 5.0), (5.0, 5.0), (12.0, 20.0), (0.0, 0.0)]
)
def test_round_timeout(value, expected):
    assert round_timeout_ms(value) == expected


def test_baseline_gives_the_far_tail_in_json_text_and_html(tmp_path, capsys):
    from workbench.analysis.budget import budget

    path = RUNS / "tabular-cpu-bs1-fp32"
    assert main(["audit", str(path), "--json"]) == 0
    e2e = json.loads(capsys.readouterr().out)["runs"][0]["baseline"]["end_to_end"]
    shown = budget(load_run(path))["end_to_end"]
    tail = ("p999_ms", "p999_ci_low_ms", "p999_ci_high_ms", "p999_needs_count", "max_ms")
    assert {k: e2e[k] for k in (*tail, "max_above_percentile")} == {
        k: shown[k] for k in (*tail, "max_above_percentile")
    }
    assert e2e["p999_ms"] is None and e2e["max_above_percentile"] == 99.502  # 600 requests
    out = tmp_path / "audit.html"
    assert main(["audit", str(path), "--out", str(out)]) == 0
    line = (
        f"p99.9: 600 successful requests; 5661 bound it; max {shown['max_ms']:.3f} ms "
        "(at or above p99.50 with 95% confidence)"
    )
    assert f"    end to end {line}" in capsys.readouterr().out.splitlines()
    page = out.read_text()
    assert f"<p>{line}</p>" in page and "Far tail: the share of requests at least this slow" in page
