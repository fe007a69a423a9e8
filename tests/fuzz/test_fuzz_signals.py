"""Signal trials (tests/support/signal_trials.py): the judge of what a signalled run left, and two real trials."""

from __future__ import annotations

import shutil

import pytest

from tests.support.input_fuzz import BASE_RUN
from tests.support.signal_trials import judge_trial, trial

pytestmark = pytest.mark.fuzz


def test_a_readable_run_folder_is_ok(tmp_path):
    shutil.copytree(BASE_RUN, tmp_path / "run")
    assert judge_trial(
        130, "workbench profile: interrupted after 9 requests; run written to run\n", tmp_path
    ) == (
        "ok",
        "",
    )


def test_a_run_folder_show_cannot_read_is_unreadable(tmp_path):
    shutil.copytree(BASE_RUN, tmp_path / "run")
    (tmp_path / "run" / "run.json").write_text("{")
    assert judge_trial(143, "", tmp_path)[0] == "unreadable"


def test_a_run_said_written_but_missing_is_lost(tmp_path):
    assert (
        judge_trial(
            130, "interrupted after 9 requests; run written to x (status: interrupted)\n", tmp_path
        )[0]
        == "lost"
    )
    assert judge_trial(0, "", tmp_path)[0] == "lost"


def test_no_folder_before_anything_was_measured_is_allowed(tmp_path):
    err = "workbench profile: interrupted before any request finished; no run written\n"
    assert judge_trial(130, err, tmp_path) == ("nothing_measured", err.strip())


def test_a_half_written_folder_beside_the_run_is_a_leftover(tmp_path):
    shutil.copytree(BASE_RUN, tmp_path / "run")
    (tmp_path / ".run.tmp-123").mkdir()
    assert judge_trial(130, "", tmp_path)[0] == "leftover"


def test_an_exit_other_than_the_signals_or_an_internal_error_is_bad(tmp_path):
    assert judge_trial(3, "internal error\n", tmp_path) == ("bad_exit", "exit 3: internal error")
    assert judge_trial(-2, "profile: terminated (SIGTERM)\n", tmp_path)[0] == "bad_exit"
    err = "profile: error: internal error: TypeError: x; please report it\n"
    assert judge_trial(-15, err, tmp_path)[0] == "bad_exit"
    assert judge_trial(-15, "", tmp_path)[0] == "nothing_measured"  # SIGTERM before its handler


# long runs (8 s of measuring): at 6 s a quiet machine is measuring and a busy one still starting,
# never in the save, where the trials of benchmarks/fuzz_inputs.py find today's failures
LONG = {"profile": ("--requests", "1000000", "--max-duration", "8"), "load": ("--duration", "8")}


@pytest.mark.slow
@pytest.mark.parametrize(("command", "signame"), [("profile", "SIGINT"), ("load", "SIGTERM")])
def test_a_signalled_run_keeps_a_readable_folder_or_measured_nothing(command, signame, tmp_path):
    outcome, why = trial(command, signame, 6.0, tmp_path, LONG[command])
    assert outcome in ("ok", "nothing_measured"), why
