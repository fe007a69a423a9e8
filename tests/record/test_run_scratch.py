"""A run owns its scratch trace folder: save, close, ``with`` and garbage collection remove it."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pandas as pd

from workbench.record import REQUEST_COLUMNS, SCRATCH_PREFIX, STAGE_COLUMNS, Run, scratch_folder

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "data" / "traces" / "cpu_stages.pt.trace.json.gz"


def scratch_run() -> Run:
    folder = scratch_folder()
    trace = Path(shutil.copy(TRACE, folder / TRACE.name))
    requests = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in REQUEST_COLUMNS.items()})
    stages = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in STAGE_COLUMNS.items()})
    return Run(
        meta={"pipeline": "p", "stages": []}, requests=requests, stages=stages, trace_path=trace
    )


def test_scratch_folders_use_the_one_prefix():
    run = scratch_run()
    assert run.scratch.name.startswith(SCRATCH_PREFIX) and run.scratch == run.trace_path.parent
    run.close()


def test_close_removes_the_scratch_folder_and_forgets_the_trace():
    run = scratch_run()
    folder = run.scratch
    run.close()
    assert not folder.exists() and run.trace_path is None and run.scratch is None
    run.close()  # twice is fine


def test_with_block_removes_it():
    with scratch_run() as run:
        folder = run.scratch
        assert folder.is_dir()
    assert not folder.exists()


def test_garbage_collection_removes_it():
    run = scratch_run()
    folder = run.scratch
    del run
    gc.collect()
    assert not folder.exists()


def test_save_moves_the_trace_into_the_run_and_drops_the_scratch(tmp_path):
    run = scratch_run()
    folder = run.scratch
    path = run.save(tmp_path / "r")
    assert not folder.exists() and run.trace_path == path / TRACE.name and run.trace_path.is_file()
    run.close()  # a saved run's files are never touched
    assert (path / TRACE.name).is_file() and run.trace_path == path / TRACE.name


def test_a_trace_outside_the_temp_folder_is_not_owned(tmp_path):
    trace = Path(shutil.copy(TRACE, tmp_path / TRACE.name))
    run = scratch_run()
    run.close()
    run = Run(meta={"stages": []}, requests=run.requests, stages=run.stages, trace_path=trace)
    assert run.scratch is None
    run.close()
    assert trace.is_file()
