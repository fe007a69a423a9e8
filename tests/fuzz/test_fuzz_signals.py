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
    assert judge_trial(-2, "", tmp_path, sent="SIGINT")[0] == "nothing_measured"


def test_the_signals_own_end_after_the_run_was_saved_is_its_exit_code(tmp_path):
    # SIGINT while Python finalized after a saved run (the default handler restored): exit -2, nothing
    # printed; a shell reports 130, and the run is there
    shutil.copytree(BASE_RUN, tmp_path / "run")
    assert judge_trial(-2, "", tmp_path, sent="SIGINT") == ("ok", "")
    assert judge_trial(-2, "", tmp_path, sent="SIGTERM")[0] == "bad_exit"


MARKING = """
import itertools, pathlib, time
from workbench import Pipeline

def build(config):
    pipe = Pipeline("marking", items=lambda: itertools.count())

    def work(batch):
        pathlib.Path({marker!r}).touch()  # the run is measuring
        time.sleep(0.002)
        return batch

    pipe.add("work", work)
    return pipe
"""


# Signalled 0.5 s after the pipeline's first call (a random moment can fall in torch's start-up or in
# the save, where benchmarks/fuzz_inputs.py's trials find today's failures): the run is measuring, so
# the folder must be there and readable.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "signame", "extra"),
    [
        (
            "profile",
            "SIGINT",
            ("--closed-loop", "--requests", "1000000", "--max-duration", "8", "--traced", "0"),
        ),
        ("load", "SIGTERM", ("--duration", "8")),
    ],
)
def test_a_run_signalled_while_measuring_keeps_a_readable_folder(command, signame, extra, tmp_path):
    marker = tmp_path / "measuring"
    (tmp_path / "marking.py").write_text(MARKING.format(marker=str(marker)))
    pipeline = ("--pipeline", f"{tmp_path / 'marking.py'}:build")
    runs = tmp_path / "trial"
    assert trial(command, signame, 0.5, runs, (*extra, *pipeline), ready=marker) == ("ok", "")
