"""RunMeta: typed fields, the mapping view older code uses, unknown keys kept, format 1 migrated."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from workbench.errors import RunRecordError
from workbench.record import REQUEST_COLUMNS, STAGE_COLUMNS, Run, RunMeta, load_run, save_run
from workbench.record.meta import MetaError, migrate

REPO = Path(__file__).resolve().parents[2]


def empty_run(meta) -> Run:
    requests = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in REQUEST_COLUMNS.items()})
    stages = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in STAGE_COLUMNS.items()})
    return Run(meta=meta, requests=requests, stages=stages)


def test_a_dict_becomes_a_typed_meta_and_reads_like_the_old_dict():
    run = empty_run({"kind": "load", "pipeline": "p", "stages": ["a"], "config": {"batch_size": 4}, "load": {"x": 1}})
    meta = run.meta
    assert isinstance(meta, RunMeta) and meta.kind == "load" and meta.config == {"batch_size": 4}
    assert meta["config"]["batch_size"] == 4 and meta["load"] == {"x": 1} and meta.get("noise") is None
    assert "noise" not in meta and "load" in meta and meta["format"] == "workbench.run" and meta["version"] == 2
    assert dict(meta)["status"] == "complete" and run.status == "complete"
    with pytest.raises(KeyError):
        meta["noise"]


def test_optional_sections_others_add_are_typed_fields():
    meta = RunMeta(fingerprint={"h": "1"}, noise={"cv": 0.1}, status="incomplete: timeout", quantization={},
                   memory={"rss": []}, cold_start={}, attributes={"a": 1}, serving={"url": "u"})
    assert meta["noise"] == {"cv": 0.1} and meta["status"] == "incomplete: timeout" and meta.get("serving") == {"url": "u"}


def test_sync_policy_is_stage_unless_a_run_says_request():
    assert RunMeta().sync_policy == "stage"  # a CPU run records no sync
    assert RunMeta(timing={"sync": None, "warmup": 10}).sync_policy == "stage"
    assert RunMeta(timing={"sync": "stage"}).sync_policy == "stage"
    assert RunMeta(timing={"sync": "request"}).sync_policy == "request"


@pytest.mark.parametrize("data, field", [
    ({"kind": "batch"}, "kind"), ({"config": {"batch_size": "eight"}}, "config.batch_size"),
    ({"status": "finished"}, "status"), ({"noise": "high"}, "noise"), ({"stages": ["a", "a"]}, "stages"),
])
def test_bad_fields_are_named(data, field):
    with pytest.raises(MetaError) as info:
        RunMeta.from_dict(data)
    assert info.value.field == field
    with pytest.raises(RunRecordError, match=f"run meta: field '{field}'"):
        empty_run(data)


def test_unknown_keys_survive_a_save_and_load(tmp_path):
    run = empty_run({"pipeline": "p", "stages": [], "from_the_future": {"k": [1, 2]}})
    assert run.meta.extra == {"from_the_future": {"k": [1, 2]}} and run.meta["from_the_future"] == {"k": [1, 2]}
    back = load_run(save_run(run, tmp_path / "r"))
    assert back.meta.extra == {"from_the_future": {"k": [1, 2]}}
    written = json.loads((tmp_path / "r" / "run.json").read_text())
    assert written["from_the_future"] == {"k": [1, 2]} and written["version"] == 2 and "extra" not in written


def test_format_1_is_migrated_and_newer_is_refused(tmp_path):
    assert migrate({"format": "workbench.run", "version": 1, "pipeline": "p"}) == {
        "format": "workbench.run", "version": 2, "pipeline": "p", "kind": "profile", "status": "complete", "trace": None}
    v1 = REPO / "data" / "runs" / "tabular-cuda-bs8-fp32"  # recorded in format 1
    assert json.loads((v1 / "run.json").read_text())["version"] == 1
    run = load_run(v1)
    assert run.meta.status == "complete" and run.kind == "profile" and run.requests["error_where"].isna().all()
    newer = Path(shutil.copytree(v1, tmp_path / "newer"))
    meta = json.loads((newer / "run.json").read_text()) | {"version": 3}
    (newer / "run.json").write_text(json.dumps(meta))
    with pytest.raises(RunRecordError, match="field 'version' is 3, newer than this workbench reads"):
        load_run(newer)
