"""The fuzz judge (tests/support/fuzz_runner.py): each outcome from a constructed result, exactly."""

from __future__ import annotations

import pytest

from tests.support.fuzz_runner import Result, error_lines, family, judge

pytestmark = pytest.mark.fuzz
USAGE = "usage: python -m workbench show [-h] [--json]\n                 RUN_DIR\n"


@pytest.mark.parametrize(
    ("result", "argv", "outcome"),
    [
        (Result(0, '{"p50_ms": 1.5}', "", 0.1), ["show", "--json"], "ok"),
        (Result(4, "gate: too noisy\n", "", 0.1), ["gate"], "ok"),
        (Result(0, '{"p50_ms": NaN}', "", 0.1), ["show", "--json"], "nan"),
        (Result(1, '{"x": -Infinity}', "", 0.1), ["show", "--json"], "nan"),
        (Result(0, "p50 nan ms\n", "", 0.1), ["show"], "nan"),
        (Result(0, "p99 inf ms\n", "", 0.1), ["show"], "nan"),
        (Result(0, "run /tmp/nan-run: p50 1.0 ms\n", "", 0.1), ["show", "/tmp/nan-run"], "ok"),
        (Result(0, "{", "", 0.1), ["show", "--json"], "crash"),
        (Result(2, "", "workbench show: error: no run\n", 0.1), ["show"], "clean_error"),
        (Result(2, "", USAGE + "show: error: bad\n", 0.1), ["show"], "clean_error"),
        (Result(2, "", "show: error: bad\nand more\n", 0.1), ["show"], "crash"),
        (Result(2, "", USAGE, 0.1), ["show"], "crash"),
        (Result(3, "", "show: internal error: KeyError: 'x'\n", 0.1), ["show"], "exit_3"),
        (
            Result(1, "", "Traceback (most recent call last):\n  x\nValueError\n", 0.1),
            ["show"],
            "crash",
        ),
        (Result(-11, "", "the worker process died: exit -11\n", 0.1), ["show"], "crash"),
        (Result(143, "", "profile: terminated\n", 60.0, stopped=True), ["profile"], "stopped"),
        (Result(-1, "", "", 90.0, stopped=True, hung=True), ["profile"], "hang"),
    ],
)
def test_judge(result, argv, outcome):
    assert judge(result, argv)[0] == outcome


def test_a_command_that_runs_until_stopped_is_ok_when_the_deadline_stops_it():
    stopped = Result(143, "", "serve: stopped by SIGTERM\n", 3.0, stopped=True)
    assert judge(stopped, ["serve"], stop_ok=True) == ("ok", "")
    assert judge(stopped, ["serve"])[0] == "stopped"


def test_error_lines_skip_the_usage_block_only():
    assert error_lines(USAGE + "show: error: bad\n") == ["show: error: bad"]
    assert error_lines("one\ntwo\n") == ["one", "two"]


def test_error_lines_are_what_a_terminal_shows_of_a_progress_bar():
    assert error_lines("\rreading [..] 0%\r               \rshow: error: bad\n") == [
        "show: error: bad"
    ]
    assert error_lines("\rreading [..] 0%\nshow: error: bad\n") == [
        "reading [..] 0%",
        "show: error: bad",
    ]


def test_a_family_blanks_paths_quoted_values_and_numbers():
    a = family("show: internal error: KeyError: 'dur_ns' in /tmp/a/run-12/run.json at row 3")
    b = family("show: internal error: KeyError: 'start_ns' in /tmp/b/run-7/run.json at row 41")
    assert a == b == "show: internal error: KeyError: 'X' in PATH at row N"
