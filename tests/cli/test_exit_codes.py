"""One exit-code policy for every command: 0 ok, 1 measured failure, 2 bad input, 3 internal error, 130 interrupted,
141 stdout closed by its reader."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.cli import started, workbench
from workbench import cli
from workbench.errors import ConfigError


def _with_func(monkeypatch, func):
    """Make ``show`` call ``func`` whatever its argument, to drive main()'s policy."""
    real = cli.build_parser

    def parser(argv=None):
        p = real(argv)
        p.set_defaults(func=func)
        sub = next(a for a in p._actions if a.dest == "command")
        sub.choices["show"].set_defaults(func=func)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)


def _raise(exc):
    def func(args):
        raise exc

    return func


@pytest.mark.parametrize(
    "exc, code",
    [
        (ConfigError("batch_size must be >= 1"), 2),
        (FileNotFoundError(2, "No such file or directory", "/nope/run"), 2),
        (ZeroDivisionError("division by zero"), 3),
        (KeyError("p99_ms"), 3),
        (KeyboardInterrupt(), 130),
    ],
)
def test_each_kind_of_error_has_its_exit_code_and_one_line(monkeypatch, capsys, exc, code):
    _with_func(monkeypatch, _raise(exc))
    monkeypatch.delenv("WORKBENCH_DEBUG", raising=False)
    assert cli.main(["show", "x"]) == code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("workbench show:")


def test_internal_error_names_itself_and_the_debug_switch(monkeypatch, capsys):
    _with_func(monkeypatch, _raise(ZeroDivisionError("division by zero")))
    monkeypatch.delenv("WORKBENCH_DEBUG", raising=False)
    assert cli.main(["show", "x"]) == 3
    err = capsys.readouterr().err
    assert (
        "internal error: ZeroDivisionError: division by zero" in err and "WORKBENCH_DEBUG=1" in err
    )


def test_debug_switch_prints_the_traceback(monkeypatch, capsys):
    _with_func(monkeypatch, _raise(ZeroDivisionError("division by zero")))
    monkeypatch.setenv("WORKBENCH_DEBUG", "1")
    assert cli.main(["show", "x"]) == 3
    assert "Traceback (most recent call last)" in capsys.readouterr().err


@pytest.mark.parametrize("returned, code", [(None, 0), (0, 0), (1, 1)])
def test_a_command_returns_its_own_code(monkeypatch, returned, code):
    _with_func(monkeypatch, lambda args: returned)
    assert cli.main(["show", "x"]) == code


def test_usage_error_is_bad_input_in_a_real_process():
    proc = workbench("profile", "--batch-size", "two", timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_missing_run_folder_is_bad_input_in_a_real_process(tmp_path):
    proc = workbench("show", tmp_path / "missing", timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1


def _stdout_to_a_pipe_without_reader(monkeypatch):
    """sys.stdout writes to a pipe whose read end is closed, as under ``... | head -1`` once head exits."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    stdout = os.fdopen(write_fd, "w")
    monkeypatch.setattr(sys, "stdout", stdout)
    return stdout


def _print_lines(args):
    for i in range(10):
        print(f"line {i}", flush=True)
    return 0


def test_closed_stdout_exits_141_without_a_message(monkeypatch, capsys):
    stdout = _stdout_to_a_pipe_without_reader(monkeypatch)
    _with_func(monkeypatch, _print_lines)
    try:
        assert cli.main(["show", "x"]) == 141
        print(
            "after the reader left", file=stdout, flush=True
        )  # now /dev/null: no second BrokenPipeError
    finally:
        stdout.close()
    assert capsys.readouterr().err == ""


def test_broken_pipe_of_a_socket_is_still_an_internal_error(monkeypatch, capsys):
    _with_func(monkeypatch, _raise(BrokenPipeError(32, "Broken pipe")))
    monkeypatch.delenv("WORKBENCH_DEBUG", raising=False)
    assert cli.main(["show", "x"]) == 3  # stdout is fine: the pipe that broke was another one
    assert "internal error: BrokenPipeError" in capsys.readouterr().err


def test_show_into_a_closed_pipe_is_quiet_in_a_real_process():
    run = Path(__file__).resolve().parents[2] / "data" / "runs" / "text-cpu-bs1-fp32"
    proc = started("show", run, "--json")
    proc.stdout.close()  # the reader leaves before the first line, as `head -0` would
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == ""


def test_an_abandoned_stage_thread_does_not_change_the_exit_code(monkeypatch, capsys):
    """A stage thread still running at the end (abandoned after a timeout) makes entry leave with os._exit(code),
    after the atexit handlers, so the interpreter's finalization cannot abort the process (issue: SIGABRT on CUDA)."""
    # stage threads come from workbench.guard; the exit check looks for them only once it is loaded
    import workbench.guard  # noqa: F401

    stuck, calls = threading.Event(), []
    thread = threading.Thread(target=stuck.wait, name="workbench-stages", daemon=True)
    thread.start()
    monkeypatch.setattr(sys, "argv", ["workbench", "show", "x"])
    _with_func(monkeypatch, lambda args: print("measured") or 1)
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: calls.append("atexit"))

    def fake_exit(code):
        calls.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    try:
        with pytest.raises(SystemExit):
            cli.entry()
    finally:
        stuck.set()
        thread.join()
    assert calls == ["atexit", 1] and capsys.readouterr().out == "measured\n"
    assert cli.exit_past_threads(0) == 0  # no stage thread alive: the normal exit


def test_a_timed_out_stage_exits_1_in_a_real_process(tmp_path):
    module = tmp_path / "sleepy.py"
    module.write_text(
        "import itertools, time\n"
        "from workbench import Pipeline\n"
        "def build(config):\n"
        "    pipe = Pipeline('sleepy', items=lambda: itertools.count())\n"
        "    pipe.add('forward', lambda batch: time.sleep(60) if batch[0] >= 3 else batch)\n"
        "    return pipe\n"
    )
    started = time.monotonic()
    proc = workbench(
        *["profile", "--closed-loop", "--pipeline", "sleepy:build", "--requests", "10"],
        *["--warmup", "0", "--traced", "0", "--timeout-s", "0.5", "--out", tmp_path / "run"],
        timeout=120,
        cwd=tmp_path,
        env={"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    assert proc.returncode == 1, proc.stderr
    assert time.monotonic() - started < 50 and (tmp_path / "run" / "run.json").exists()
