"""benchmarks/run_all.py (``make bench``): every benchmark, the 0.2 ones with small settings, optional ones skipped."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.conftest import load_script

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def run_all():
    return load_script(BENCHMARKS / "run_all.py", "run_all_under_test")


def test_the_new_benchmarks_are_listed_with_small_settings(run_all):
    listed = {name: args for name, args, _ in run_all.BENCHMARKS}
    assert {"bench_compare", "bench_stacks", "fuzz_traces", "bench_room", "bench_serve_gc"} <= set(
        listed
    )
    assert listed["fuzz_traces"] == ["--smoke"]
    assert listed["bench_stacks"][:4] == ["--requests", "20", "--blocks", "2"]


def test_every_option_given_is_one_its_script_defines(run_all):
    for name, args, _ in run_all.BENCHMARKS:
        script = BENCHMARKS / f"{name}.py"
        if not script.exists():
            continue
        defined = set(re.findall(r"add_argument\(\s*\"(--[a-z-]+)\"", script.read_text()))
        given = {a for a in args if a.startswith("--")}
        assert given <= defined, (name, given - defined)


def test_small_runs_never_overwrite_the_quoted_results(run_all):
    quoted = {
        "compare.md",
        "compare.json",
        "stacks.md",
        "fuzz_traces.md",
        "room.md",
        "serve_gc.md",
        "batching_validation.md",
        "scale.md",
        "scale.json",
        "continuous.md",
        "continuous.json",
    }
    for _, args, _ in run_all.BENCHMARKS:
        assert not {Path(a).name for a in args} & quoted


def test_missing_required_fails_absent_optional_is_skipped(run_all, tmp_path, monkeypatch, capsys):
    (tmp_path / "ok.py").write_text("raise SystemExit(0)\n")
    (tmp_path / "slow.py").write_text("raise SystemExit(1)\n")  # a missed goal
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    monkeypatch.setattr(run_all, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(
        run_all,
        "BENCHMARKS",
        [("ok", [], True), ("slow", [], True), ("gone", [], True), ("extra", ["--smoke"], False)],
    )
    assert [cmd is None for _, cmd in run_all.commands()] == [False, False, False, True]
    assert run_all.main([]) == 1
    out = capsys.readouterr().out
    assert "== extra: absent (optional), skipped" in out and "== gone: missing" in out
    assert out.rstrip().endswith("failed or missed goals: slow, gone")
    monkeypatch.setattr(run_all, "BENCHMARKS", [("ok", [], True), ("extra", [], False)])
    assert run_all.main([]) == 0
    assert run_all.main(["--list"]) == 0
    assert f"ok: {sys.executable} {tmp_path / 'ok.py'}" in capsys.readouterr().out
