"""``workbench profile`` measures, saves, then explains: a summary that raises costs one line naming it,
never the run folder or the measurement's exit code (issue 35)."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main
from workbench.record import load_run

PIPELINE = """
import itertools, time
from workbench import Pipeline

def build(config):
    p = Pipeline("steady", items=lambda: itertools.count())
    p.add("parse", lambda b: b)

    def forward(b):
        time.sleep(3 if b[0] == config.options.get("hang_at") else 0.001)  # abandoned at --timeout-s
        if config.options.get("fail"):
            raise ValueError("rejected")
        return b

    p.add("forward", forward)
    return p
"""
REQUESTS, WARMUP = 12, 2
# (what the line names, the function made to raise): every summary a profile run computes
SUMMARIES = [
    ("the noise reading", "workbench.noise.NoiseProbe.finish"),
    ("the memory trend", "workbench.memory.MemorySampler.summary"),
    ("the stack summary", "workbench.analysis.stacks.stack_summary"),
    ("writing the stack summary", "workbench.cli.profile.save_meta"),
    ("the budget", "workbench.cli.profile.budget"),
    ("printing the budget", "workbench.cli.profile.print_budget"),
]


@pytest.fixture
def pipeline_file(tmp_path):
    f = tmp_path / "steady_pipe.py"
    f.write_text(PIPELINE)
    return f


def profile_argv(pipeline_file, out, *more: str) -> list[str]:
    return [
        "profile",
        "--closed-loop",
        "--pipeline",
        f"{pipeline_file}:build",
        "--requests",
        str(REQUESTS),
        "--warmup",
        str(WARMUP),
        "--traced",
        "0",
        "--out",
        str(out),
        *more,
    ]


def planted(*args, **kwargs):
    raise RuntimeError("planted\nsecond line")


def failure_lines(err: str, out) -> list[str]:
    return [line for line in err.splitlines() if f"the run is saved at {out} without it" in line]


CASES = [
    pytest.param(what, target, as_json, id=f"{what}-{'json' if as_json else 'text'}")
    for what, target in SUMMARIES
    for as_json in (False, True)
    if not (as_json and what == "printing the budget")  # --json prints no budget text
]


@pytest.mark.parametrize("what, target, as_json", CASES)
def test_a_summary_that_raises_is_one_line_and_the_run_is_kept(
    what, target, as_json, pipeline_file, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(target, planted)
    if what == "writing the stack summary":  # a summary to write, however few samples were taken
        monkeypatch.setattr("workbench.analysis.stacks.stack_summary", lambda *a, **k: {})
    out = tmp_path / "run"
    code = main(profile_argv(pipeline_file, out, *(["--json"] if as_json else [])))
    captured = capsys.readouterr()
    assert code == 0, captured.err  # the measurement's exit code: every request succeeded
    assert failure_lines(captured.err, out) == [
        f"workbench profile: {what} failed (RuntimeError: planted); the run is saved at {out} "
        "without it (a bug in the workbench: please report it)"
    ]
    run = load_run(out)
    assert run.meta.status == "complete" and len(run.requests) == REQUESTS + WARMUP
    if as_json:
        assert json.loads(captured.out)["run_dir"] == str(out)
    else:
        assert captured.out.rstrip().endswith(f"run written to {out}")


def test_the_failure_summary_raising_keeps_the_exit_code_of_the_measurement(
    pipeline_file, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr("workbench.cli.profile.failure_summary", planted)
    out = tmp_path / "run"
    code = main(profile_argv(pipeline_file, out, "--option", "fail=true"))
    err = capsys.readouterr().err
    assert code == 1  # every measured request failed
    assert f"workbench profile: every measured request failed ({REQUESTS}):" in err
    assert failure_lines(err, out) == [
        "workbench profile: the failure summary failed (RuntimeError: planted); the run is saved "
        f"at {out} without it (a bug in the workbench: please report it)"
    ]
    assert load_run(out).requests["ok"].sum() == 0


def test_the_run_is_on_disk_before_any_summary_is_computed(
    pipeline_file, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "run"
    seen = []

    def look(*args, **kwargs):
        seen.append(load_run(out).meta.stacks)  # the stack summary is computed after the save
        return None

    monkeypatch.setattr("workbench.analysis.stacks.stack_summary", look)
    assert main(profile_argv(pipeline_file, out)) == 0
    assert seen == [None]


def test_a_timeout_during_warm_up_saves_the_run_incomplete_and_exits_1(
    pipeline_file, tmp_path, capsys
):
    # issue 35: exit 2 ("field 'memory' must be an object, got None") and nothing saved
    out = tmp_path / "run"
    argv = profile_argv(pipeline_file, out, "--option", "hang_at=1", "--timeout-s", "0.5")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "request 1 timed out" in err and "saved as 'incomplete: timeout'" in err
    run = load_run(out)
    assert run.meta.status == "incomplete: timeout" and list(run.requests["warmup"]) == [True] * 2
