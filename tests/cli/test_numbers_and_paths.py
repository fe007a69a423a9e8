"""Issue 27: numbers with ranges and units, paths checked before measuring, strict JSON, nothing measured lost."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import time
from pathlib import Path

import pytest

from tests.support.cli import main_output as cli, one_line, workbench
from workbench.cli import main
from workbench.cli.output import check_memory, dumps, number, save_measured, strict
from workbench.errors import ConfigError, WorkbenchError
from workbench.record import load_run

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "data" / "runs" / "tabular-cpu-bs4-fp32"

PRINTING = """
import itertools, threading, time
from workbench import Pipeline
def build(config):
    p = Pipeline("chatty", items=lambda: itertools.count())
    p.add("parse", lambda x: print("a stage prints", x) or x)
    p.add("forward", lambda x: x)
    return p
def build_threaded(config):
    p = Pipeline("threaded", items=lambda: itertools.count())
    def start(x):
        if x == [0]:
            threading.Thread(target=time.sleep, args=(600,), name="left-behind").start()
        return x
    p.add("parse", start)
    p.add("forward", lambda x: x)
    return p
"""


@pytest.fixture
def pipeline_file(tmp_path) -> Path:
    f = tmp_path / "chatty.py"
    f.write_text(PRINTING)
    return f


def test_a_number_type_checks_range_integrality_and_finiteness():
    seed = number("--seed", 0, 2**63 - 1, "", integer=True)
    assert seed("7") == 7 and seed("9223372036854775807") == 2**63 - 1
    for bad in ("-1", "1.5", "1e3", "nan", "x", "9223372036854775808"):
        with pytest.raises(
            WorkbenchError, match=r"--seed must be an integer in \[0, 9_223_372_036_854_775_807\]"
        ):
            seed(bad)
    sla = number("--sla-ms", 0, 3_600_000, "ms", lo_open=True)
    assert sla("0.5") == 0.5 and sla.range_text == "in (0, 3.6e+06] ms"
    for bad in ("0", "inf", "-inf", "nan", "1e300"):
        with pytest.raises(
            WorkbenchError, match=r"--sla-ms must be a number in \(0, 3.6e\+06\] ms"
        ):
            sla(bad)


def test_every_number_option_of_these_commands_states_range_and_unit():
    for command in ("profile", "simulate", "load", "audit"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(out.getvalue().split("options:", 1)[1].split())
        for option in {
            "profile": (
                "--requests",
                "--warmup",
                "--traced",
                "--timeout-s",
                "--max-duration",
                "--batch-size",
                "--threads",
            ),
            "simulate": (
                "--rate",
                "--max-batch-size",
                "--max-wait-ms",
                "--concurrency",
                "--seed",
                "--requests",
                "--duration",
            ),
            "load": ("--duration", "--drain-timeout", "--timeout-s"),
            "audit": ("--sla-ms",),
        }[command]:
            help_line = text.split(f"{option} ", 1)[1][:400]
            assert "[in " in help_line, (command, option, help_line)


@pytest.mark.parametrize(
    "argv, words",
    [
        (
            ["audit", str(RUN), "--json", "--sla-ms", "inf"],
            ("--sla-ms must be a number in (0, 3.6e+06] ms, got inf",),
        ),
        (
            ["simulate", "--service", str(RUN), "--seed", "-1", "--rate", "10"],
            ("--seed must be an integer",),
        ),
        (
            ["simulate", "--service", str(RUN), "--rate", "1e-9"],
            ("--rate must be a number in [0.001, 1e+07]",),
        ),
        (
            [
                "simulate",
                "--service",
                str(RUN),
                "--rate",
                "100",
                "--requests",
                "1000000000",
                "--max-batch-size",
                "4",
            ],
            ("--requests: 1e+09 would need about 372.5 GiB (400 B each)",),
        ),
        (["profile", "--pipeline", "/etc/passwd:build"], ("'/etc/passwd' is not a Python file",)),
    ],
)
def test_bad_numbers_and_paths_are_one_line(argv, words):
    rc, _, err = cli(argv)
    one_line(rc, err, *words)


def test_memory_is_checked_before_allocating_and_says_how_much():
    with pytest.raises(
        ConfigError,
        match=r"x: 1e\+13 would need about 72.8 TiB \(8 B each\), more than the 1.0 GiB",
    ):
        check_memory("x", 1e13, 8, available=2**30)
    check_memory("x", 1e6, 8, available=2**30)


def test_out_under_a_regular_file_is_refused_before_measuring(pipeline_file, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    started = time.perf_counter()
    rc, _, err = cli(
        [
            "profile",
            "--closed-loop",
            "--pipeline",
            f"{pipeline_file}:build",
            "--requests",
            "100000",
            "--out",
            str(blocker / "run"),
        ]
    )
    one_line(rc, err, f"--out {blocker / 'run'}: {blocker} is a file, not a folder")
    assert time.perf_counter() - started < 5  # 100000 requests were never measured


def test_audit_out_a_folder_is_refused_first_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "reports"
    target.mkdir()
    rc, _, err = cli(["audit", str(RUN), "--out", str(target)])
    one_line(rc, err, f"--out {target} is a folder")
    assert list(tmp_path.iterdir()) == [target] and list(target.iterdir()) == []


def test_json_output_is_strict():
    assert strict({"a": [1.0, math.nan, {"b": math.inf}], "c": (2, -math.inf)}) == {
        "a": [1.0, None, {"b": None}],
        "c": [2, None],
    }
    import numpy as np

    assert json.loads(dumps({"x": np.float64("nan"), "y": np.int64(3)})) == {"x": None, "y": 3}


def test_a_stage_that_prints_leaves_json_on_stdout(pipeline_file, tmp_path):
    rc, out, err = cli(
        [
            "profile",
            "--closed-loop",
            "--pipeline",
            f"{pipeline_file}:build",
            "--requests",
            "5",
            "--warmup",
            "0",
            "--traced",
            "0",
            "--out",
            str(tmp_path / "run"),
            "--json",
        ]
    )
    assert rc == 0, err
    assert json.loads(out)["end_to_end"]["count"] == 5 and "a stage prints [0]" in err


def test_a_failed_save_goes_to_a_fallback_folder_the_error_names(monkeypatch, tmp_path):
    run = load_run(RUN)
    real_save = type(run).save
    calls = []

    def full_disk_once(self, path, **kw):
        calls.append(Path(path))
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_save(self, path, **kw)

    monkeypatch.setattr(type(run), "save", full_disk_once)
    with pytest.raises(ConfigError) as info:
        save_measured(run, tmp_path / "out")
    message = str(info.value)
    assert message.startswith(
        f"--out {tmp_path / 'out'}: could not save the run (No space left on device: "
    )
    fallback = calls[1]
    assert f"it was saved to {fallback} instead" in message and fallback != tmp_path / "out"
    assert len(load_run(fallback).requests) == len(run.requests)


def test_the_process_exits_after_saving_when_a_stage_left_a_thread_running(pipeline_file, tmp_path):
    started = time.perf_counter()
    proc = workbench(
        *["profile", "--closed-loop", "--pipeline", f"{pipeline_file}:build_threaded"],
        *["--requests", "3", "--warmup", "0", "--traced", "0", "--out", tmp_path / "run"],
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "exiting with 1 thread(s) still running that a stage started (left-behind)" in proc.stderr
    )
    assert (tmp_path / "run" / "run.json").is_file() and time.perf_counter() - started < 100


def test_sigterm_during_the_save_finishes_it_then_terminates(monkeypatch, tmp_path):
    # issue 35: only SIGINT was held; SIGTERM mid-save exited 143 with no run folder
    import signal

    from workbench.errors import sigterm_as_interrupt, terminated

    run = load_run(RUN)
    real_save = type(run).save

    def terminated_save(self, path, **kw):
        os.kill(os.getpid(), signal.SIGTERM)  # `timeout` or a CI cancel while the folder is written
        return real_save(self, path, **kw)

    monkeypatch.setattr(type(run), "save", terminated_save)
    with sigterm_as_interrupt(), pytest.raises(KeyboardInterrupt):
        save_measured(run, tmp_path / "out")
    assert terminated()  # the command then exits 143
    assert len(load_run(tmp_path / "out").requests) == len(run.requests)


def test_ctrl_c_during_the_save_finishes_it_then_interrupts(monkeypatch, tmp_path):
    import signal

    run = load_run(RUN)
    real_save = type(run).save

    def interrupted_save(self, path, **kw):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives while the folder is being written
        time.sleep(0.05)
        return real_save(self, path, **kw)

    monkeypatch.setattr(type(run), "save", interrupted_save)
    with pytest.raises(KeyboardInterrupt):
        save_measured(run, tmp_path / "out")
    assert len(load_run(tmp_path / "out").requests) == len(run.requests)  # the save finished first


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--option", "platt_a=NaN"], ("--option platt_a=NaN: not a finite number",)),
        (["--option", "platt_a=1e400"], ("--option platt_a=1e400: not a finite number",)),
        (["--batch-size", "100000"], ("--batch-size must be an integer in [1, 65_536] items",)),
    ],
)
def test_options_out_of_range_are_one_line_before_measuring(pipeline_file, tmp_path, extra, words):
    out = tmp_path / "run"
    rc, _, err = cli(["profile", "--pipeline", f"{pipeline_file}:build", "--out", str(out), *extra])
    one_line(rc, err, *words)
    assert not out.exists()


@pytest.mark.parametrize(
    "command", [["profile"], ["load", "--sweep", "rate=10", "--window-s", "0.1"]]
)
def test_an_out_name_too_long_to_save_is_refused_before_measuring(pipeline_file, command):
    argv = [*command, "--pipeline", f"{pipeline_file}:build", "--out", "z" * 300]
    rc, out, err = cli(argv)
    one_line(
        rc, err, "--out: a file or folder name of 300 bytes (zzzzzzzzzzzzzzzzzzzz...); at most 200"
    )
    assert "a stage prints" not in out + err


@pytest.mark.parametrize(
    "argv, words",
    [
        (
            ["load", "--url", "http://127.0.0.1:9", "--example", "text", "--timeout", "nan"],
            ("--timeout must be a number in (0, 86400] s, got nan",),
        ),
        (["locust-worker", "--master", "h", "--master-port", "0"], ("--master-port must be",)),
        (
            ["analyze", "t.json", "--max-trace-bytes", "0G"],
            ("--max-trace-bytes must be a positive byte count (say 4294967296 or 4G), got '0G'",),
        ),
        (
            ["simulate", "--service", str(RUN), "--rate", "10", "--arrivals", "bursty",
             "--burst-on-ms", "5e-324"],
            ("--burst-on-ms must be a number in [0.001, 3.6e+06] ms, got 5e-324",),
        ),
    ],
)  # fmt: skip
def test_every_kind_of_number_is_ranged_at_the_command_line(argv, words):
    rc, _, err = cli(argv)
    one_line(rc, err, *words)


@pytest.mark.parametrize(
    "config, words",
    [
        ("batch_size=100000000000000000000", "batch_size must be an integer in [1, 65_536] items"),
        ("a=-Infinity", "--config a=-Infinity: not a finite number"),
    ],
)
def test_compare_configs_out_of_range_are_one_line_before_measuring(pipeline_file, config, words):
    argv = ["compare", "--pipeline", f"{pipeline_file}:build", "--config", "a=1", "--config"]
    rc, out, err = cli([*argv, config])
    one_line(rc, err, words)
    assert "a stage prints" not in out + err


def test_export_dashboard_out_a_file_is_one_line(tmp_path):
    target = tmp_path / "report.html"
    target.write_text("mine")
    rc, _, err = cli(["export-dashboard", "--out", str(target), "--runs", str(RUN.parent)])
    one_line(rc, err, f"{target} is a file, not a folder")
    assert target.read_text() == "mine"
