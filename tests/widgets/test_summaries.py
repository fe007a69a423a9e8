"""The recorded-run index: a broken run.json is skipped with a note, never an explorer that will not start."""

from __future__ import annotations

import json

from widget_fakes import FakeProfile, synthetic_run

from workbench.config import PipelineConfig
from workbench.record import ProfileMeta, Run
from workbench.widgets import LatencyExplorer, LiveRuns
from workbench.widgets.summaries import summarize
from tests.support.run_index import index_runs
from tests.support.waits import lock_sampled, lock_tables


def test_a_bad_recorded_run_is_skipped_with_a_visible_note(tmp_path):
    synthetic_run("text", PipelineConfig(batch_size=2), 5, 1).save(tmp_path / "good")
    bad = synthetic_run("text", PipelineConfig(batch_size=8), 5, 1).save(tmp_path / "bad")
    meta = json.loads((bad / "run.json").read_text())
    meta["config"]["batch_size"] = "eight"
    (bad / "run.json").write_text(json.dumps(meta))
    (tmp_path / "not-a-run").mkdir()

    index = index_runs(tmp_path)
    assert index == {("text", "cpu", 2, "fp32"): tmp_path / "good"}
    assert len(index.skipped) == 1 and "bad/run.json: field 'config.batch_size'" in index.skipped[0]
    assert index.note.startswith("skipped 1 unreadable recorded run(s): ")

    ex = LatencyExplorer(
        "text", live=LiveRuns(profile=FakeProfile()), debounce_s=0, runs=tmp_path, batch_size=2
    ).wait()
    assert "recorded run" in ex.status.value and "'config.batch_size'" in ex.index_note.text
    assert (
        "config.batch_size" in ex.index_note.view.value
        and "workbench-warning" in ex.index_note.view.value
    )


def test_no_note_when_every_run_reads(tmp_path):
    synthetic_run("text", PipelineConfig(batch_size=2), 5, 1).save(tmp_path / "good")
    assert index_runs(tmp_path).note == ""


def test_a_sampled_run_gives_the_explorer_its_wait_line():
    """Why the slowest requests waited (issue 38) rides on the view, for the budget figure's line."""
    requests, stages = lock_tables()
    meta = ProfileMeta(pipeline="locked", stages=["record"], sampled=lock_sampled())
    view = summarize(Run(meta, requests, stages), ("run", 0), "test")
    assert view.wait_line.startswith("record: 100 % of the slowest 5 % waiting on a lock at ")
    unsampled = summarize(Run(meta.replace(sampled=None), requests, stages), ("run", 1), "test")
    assert unsampled.waits is None and unsampled.wait_line is None
