import json

import pytest

from tests.conftest import toy_pipeline
from workbench import load_run, profile
from workbench.errors import RunRecordError
from workbench.record import save_run


@pytest.fixture
def run(fake_clock):
    pipe = toy_pipeline(fake_clock, {"parse": 100, "forward": 300}, fail={"forward": {4}})
    return profile(pipe, requests=5, warmup=1, traced=0, clock=fake_clock)


def test_round_trip_keeps_tables_and_meta(tmp_path, run):
    path = run.save(tmp_path / "r1")
    back = load_run(path)
    assert back.meta.stages == ["parse", "forward"] and back.meta == run.meta
    written = json.loads((path / "run.json").read_text())
    assert written["format"] == "workbench.run" and written["version"] == 4
    assert back.requests["dur_ns"].tolist() == run.requests["dur_ns"].tolist()
    assert back.requests["error_message"].tolist() == run.requests["error_message"].tolist()
    assert str(back.stages["device_dur_ns"].dtype) == "Int64"
    assert back.path == path


def test_existing_folder_is_not_overwritten_by_default(tmp_path, run):
    run.save(tmp_path / "r")
    with pytest.raises(RunRecordError, match="already exists"):
        run.save(tmp_path / "r")
    run.save(tmp_path / "r", overwrite=True)
    assert load_run(tmp_path / "r").meta.pipeline == "toy"


def test_interrupted_write_leaves_no_loadable_folder(tmp_path, run, monkeypatch):
    import pandas as pd

    def boom(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_parquet", boom)
    with pytest.raises(KeyboardInterrupt):
        save_run(run, tmp_path / "r")
    assert list(tmp_path.iterdir()) == []  # neither the target nor the staging folder


def test_folder_without_run_json_is_incomplete(tmp_path, run):
    path = run.save(tmp_path / "r")
    (path / "run.json").unlink()
    with pytest.raises(RunRecordError, match="no run.json"):
        load_run(path)


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda p: (p / "run.json").write_text("{not json"), r"field '\$' is not valid JSON"),
        (
            lambda p: (p / "run.json").write_text(json.dumps({"format": "other"})),
            "not a workbench run",
        ),
        (lambda p: (p / "stages.parquet").unlink(), "missing stages.parquet"),
        (lambda p: (p / "requests.parquet").write_bytes(b"garbage"), "unreadable Parquet"),
    ],
)
def test_damaged_runs_raise_clear_errors(tmp_path, run, damage, match):
    path = run.save(tmp_path / "r")
    damage(path)
    with pytest.raises(RunRecordError, match=match):
        load_run(path)


def test_not_a_folder(tmp_path):
    with pytest.raises(RunRecordError, match="not a folder"):
        load_run(tmp_path / "nope")
