"""save_run/load_run: atomic overwrite (exchange and two-rename paths), leftover recovery, the trace stays inside."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import FakeClock, toy_pipeline
from workbench import profile
from workbench.errors import RunRecordError
from workbench.record import folder, load_run, save_run

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "data" / "traces" / "cpu_stages.pt.trace.json.gz"
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="renameat2 is Linux-only"
)


def make_run(requests: int = 3):
    clock = FakeClock()
    return profile(
        toy_pipeline(clock, {"parse": 100, "forward": 300}),
        requests=requests,
        warmup=0,
        traced=0,
        clock=clock,
    )


@linux_only
def test_exchange_swaps_two_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_text("a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("b")
    assert folder.exchange(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "a" / "x").read_text() == "b" and (tmp_path / "b" / "x").read_text() == "a"


@linux_only
def test_overwrite_keeps_a_run_at_the_path_at_every_instant(tmp_path, monkeypatch):
    path = make_run(3).save(tmp_path / "r")

    def no_rename_fallback(*args):  # the exchange path must never go through the two renames
        raise AssertionError("two-rename fallback used")

    monkeypatch.setattr(folder, "_two_renames", no_rename_fallback)
    seen_missing, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            if not (path / "run.json").is_file():
                seen_missing.append(True)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for n in range(4, 12):
            make_run(n).save(path, overwrite=True)
    finally:
        stop.set()
        watcher.join()
    assert seen_missing == [] and len(load_run(path).requests) == 11
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # no staging or old folder left


def test_without_exchange_two_renames_and_a_crash_between_them_is_recovered(tmp_path, monkeypatch):
    path = make_run(3).save(tmp_path / "r")
    monkeypatch.setattr(folder, "exchange", lambda a, b: False)
    make_run(5).save(path, overwrite=True)  # the fallback works when nothing crashes
    assert len(load_run(path).requests) == 5 and sorted(p.name for p in tmp_path.iterdir()) == ["r"]

    real_rename = Path.rename

    def crash_on_second(self, target):
        if Path(target) == path:  # the staging -> path rename: as if SIGKILLed before it
            raise KeyboardInterrupt
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        make_run(7).save(path, overwrite=True)
    monkeypatch.setattr(Path, "rename", real_rename)
    assert not path.exists() and [p.name for p in tmp_path.iterdir()] == [f".r.old-{os.getpid()}"]
    assert len(load_run(path).requests) == 5  # load_run put the old run back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "../other/x.pt.trace.json.gz"])
def test_a_crafted_trace_path_never_leaves_the_run_folder(tmp_path, name):
    path = make_run().save(tmp_path / "r")
    meta = json.loads((path / "run.json").read_text())
    meta["trace"] = {"file": name}
    (path / "run.json").write_text(json.dumps(meta))
    with pytest.raises(
        RunRecordError, match="field 'trace.file' must be a .json or .json.gz file name inside"
    ):
        load_run(path)


def test_a_trace_link_out_of_the_folder_is_refused_and_never_copied(tmp_path):
    run = make_run()
    run.trace_path = Path(shutil.copy(TRACE, tmp_path / TRACE.name))
    path = run.save(tmp_path / "r")
    outside = tmp_path / "secret.pt.trace.json.gz"
    outside.write_text("secret")
    (path / TRACE.name).unlink()
    (path / TRACE.name).symlink_to(outside)
    with pytest.raises(RunRecordError, match="points outside the run folder"):
        load_run(path)


def test_save_refuses_a_trace_that_is_not_a_trace_file(tmp_path):
    run = make_run()
    run.trace_path = Path("/etc/hostname")
    with pytest.raises(RunRecordError, match="must be an existing .json or .json.gz file"):
        save_run(run, tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_a_run_whose_trace_was_dropped_saves_without_naming_one(tmp_path):
    run = make_run()
    run.trace_path = Path(shutil.copy(TRACE, tmp_path / TRACE.name))
    loaded = load_run(run.save(tmp_path / "a"))
    loaded.trace_path = None
    back = load_run(loaded.save(tmp_path / "b"))
    assert (
        back.trace_path is None
        and back.meta.trace.file is None
        and back.meta.trace == loaded.meta.trace
    )


def test_an_extra_key_named_extra_is_kept_like_any_other(tmp_path):
    path = make_run().save(tmp_path / "r")
    meta = json.loads((path / "run.json").read_text()) | {"extra": 5}
    (path / "run.json").write_text(json.dumps(meta))
    run = load_run(path)
    assert run.meta.extra["extra"] == 5
    assert json.loads((run.save(tmp_path / "r2") / "run.json").read_text())["extra"] == 5


def test_run_json_text_with_a_lone_surrogate_is_written_escaped_and_loads(tmp_path):
    # issue 35: json.dumps wrote "\udce9", which no JSON reader takes back: the run never loaded
    run = make_run()
    odd = os.fsdecode(b"caf\xe9")
    run.meta = run.meta.replace(description=odd, config={"options": {odd: [odd]}})
    saved = load_run(run.save(tmp_path / "run"))
    assert saved.meta.description == "caf\\xe9"
    assert saved.meta.config.options == {"caf\\xe9": ["caf\\xe9"]}


def test_a_loaded_run_holds_one_string_per_stage_name(tmp_path):
    """Issue 35: the stage names are read as a dictionary, not as a string a row (607 MB at 1M requests)."""
    run = load_run(make_run(50).save(tmp_path / "r"))
    assert run.stages["stage"].dtype == object
    assert run.stages["stage"].value_counts().to_dict() == {"parse": 50, "forward": 50}
    assert len({id(name) for name in run.stages["stage"]}) == 2
    assert run.requests["error_type"].tolist() == [None] * 50


def test_a_table_that_stores_an_index_is_read_as_pandas_reads_it(tmp_path):
    """Issue 35: tables are read a column at a time, except a file with a stored pandas index."""
    path = make_run(4).save(tmp_path / "r")
    stages = pd.read_parquet(path / "stages.parquet")
    stages.set_axis(stages.index + 1_000).to_parquet(path / "stages.parquet")
    run = load_run(path)
    assert run.stages.index.tolist() == list(range(1_000, 1_008))
    assert run.stages["stage"].tolist() == ["parse", "forward"] * 4


@pytest.mark.parametrize("whole_up_to", [0, folder.READ_WHOLE_ROWS])
def test_a_table_read_column_by_column_or_whole_is_the_same_run(whole_up_to, tmp_path, monkeypatch):
    """Issue 35: tables of up to READ_WHOLE_ROWS rows are read whole (faster), longer ones a column at a
    time (lower peak): the same frames, text shared either way."""
    path = make_run(50).save(tmp_path / "r")
    expected = load_run(path)
    monkeypatch.setattr(folder, "READ_WHOLE_ROWS", whole_up_to)
    run = load_run(path)
    pd.testing.assert_frame_equal(run.requests, expected.requests)
    pd.testing.assert_frame_equal(run.stages, expected.stages)
    assert len({id(name) for name in run.stages["stage"]}) == 2


def test_stage_names_unknown_to_run_json_and_a_null_are_one_line(tmp_path):
    # the fuzz run's run.load case 4124: a null and an unknown name in 'stage' were exit 3 (TypeError
    # sorting None beside a str)
    path = make_run(4).save(tmp_path / "r")
    stages = pd.read_parquet(path / "stages.parquet")
    stages["stage"] = stages["stage"].astype(object)
    stages.loc[0, "stage"], stages.loc[1, "stage"] = None, "parze"
    stages.to_parquet(path / "stages.parquet", index=False)
    with pytest.raises(RunRecordError, match=r"column 'stage' names \['parze', None\], not in run"):
        load_run(path)
