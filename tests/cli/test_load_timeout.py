"""``workbench load --timeout-s`` and a hanging stage, through the real command-line entry point.

The pipeline is ``tests.hanging:build`` (``--pipeline``): its ``forward``
blocks on ``RELEASE``, set at teardown, for the items named by
``--option hang=[...]``.
"""

from __future__ import annotations

import json
import time

from tests.hanging import release_stuck_stages  # noqa: F401 (an autouse fixture)
from workbench.cli import main  # batching is one of its SUBCOMMAND_MODULES

BASE = ["--rate", "5000", "--requests", "12", "--max-batch-size", "1", "--max-wait-ms", "0"]


def load(out, *args):
    return main(["load", "--pipeline", "tests.hanging:build", *BASE, "--out", str(out), *args])


def test_a_hung_batch_exits_1_with_one_line_and_saves_an_incomplete_run(tmp_path, capsys):
    began = time.monotonic()
    assert load(tmp_path / "run", "--option", "hang=[3]", "--timeout-s", "0.5", "--json") == 1
    assert time.monotonic() - began < 10
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == (
        "workbench load: batch 3 (1 requests) timed out: stage 'forward' still running after the 0.5 s "
        "per-request timeout; its thread was abandoned; the run stopped and was saved as 'incomplete: timeout'"
    )
    printed = json.loads(captured.out)
    assert (printed["requests"], printed["failed"], printed["end_to_end"]["count"]) == (12, 9, 3)
    assert (
        printed["failures"]["forward"]["count"] == 1
        and printed["failures"]["batcher"]["count"] == 8
    )
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"] == "incomplete: timeout" and meta["load"]["timeout_s"] == 0.5


def test_a_hung_warm_up_exits_1_and_saves_an_empty_incomplete_run(tmp_path, capsys):
    began = time.monotonic()
    assert load(tmp_path / "run", "--option", "hang=[0]", "--timeout-s", "0.5") == 1
    assert time.monotonic() - began < 10  # was: the 600 s warm-up wait
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        "workbench load: executor warm-up (no request measured) timed out: stage 'forward' still running after "
        "the 0.5 s per-request timeout; its thread was abandoned; the run stopped and was saved as "
        "'incomplete: timeout'"
    )
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"] == "incomplete: timeout" and meta["timing"]["requests"] == 0
    assert [f["type"] for f in meta["load"]["warmup_failures"]] == ["Timeout"]
    assert main(["show", str(tmp_path / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "incomplete: timeout"


def test_without_timeout_a_hung_batch_is_recorded_at_the_drain_deadline(tmp_path, capsys):
    began = time.monotonic()
    assert load(tmp_path / "run", "--option", "hang=[3]", "--drain-timeout", "0.5", "--json") == 0
    assert time.monotonic() - began < 10  # was 30 s of executor join, and the batch was lost
    printed = json.loads(capsys.readouterr().out)
    assert (printed["requests"], printed["failed"], printed["end_to_end"]["count"]) == (12, 9, 3)
    assert printed["failures"]["forward"]["messages"][0]["type"] == "Timeout"
    assert printed["failures"]["forward"]["messages"][0]["message"].startswith(
        "in flight at stop: stage 'forward'"
    )
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"] == "complete" and meta["load"]["in_flight_at_stop"] == 1


def test_timeout_s_is_refused_with_url(tmp_path, capsys):
    assert (
        main(
            [
                "load",
                "--url",
                "http://127.0.0.1:9",
                "--pipeline",
                "tests.hanging:build",
                *BASE,
                "--timeout-s",
                "1",
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.strip() == (
        "workbench load: error: --timeout-s bounds the in-process load's pipeline calls; with --url use --timeout"
    )
