"""RunMeta: one class per kind of run (a tagged union), frozen typed sections, unknown keys kept,
formats 1-3 migrated to 4."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from workbench.errors import RunRecordError
from workbench.record import (
    REQUEST_COLUMNS,
    STAGE_COLUMNS,
    Config,
    LoadMeta,
    Noise,
    ProfileMeta,
    Run,
    RunMeta,
    ServedMeta,
    SimulationMeta,
    Timing,
    load_run,
    save_run,
)
from workbench.record.meta import MetaError, migrate

REPO = Path(__file__).resolve().parents[2]


def empty_run(meta) -> Run:
    requests = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in REQUEST_COLUMNS.items()})
    stages = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in STAGE_COLUMNS.items()})
    return Run(meta=meta, requests=requests, stages=stages)


def test_a_dict_becomes_a_typed_frozen_meta_without_a_mapping_interface():
    run = empty_run(
        {
            "kind": "load",
            "pipeline": "p",
            "stages": ["a"],
            "config": {"batch_size": 4},
            "load": {"late_requests": 1, "from_a_newer_tool": 2},
        }
    )
    meta = run.meta
    assert (
        isinstance(meta, LoadMeta) and meta.kind == "load" and meta.config == Config(batch_size=4)
    )
    assert (
        meta.load.late_requests == 1
        and meta.load.extra == {"from_a_newer_tool": 2}
        and meta.noise is None
    )
    assert (
        run.status == "complete"
        and meta.to_dict()["version"] == 4
        and meta.to_dict()["noise"] is None
    )
    for name in ("__getitem__", "__setitem__", "get", "keys", "items", "__iter__"):
        assert not hasattr(meta, name), name
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.kind = "profile"


def test_optional_sections_others_add_are_typed_fields():
    meta = RunMeta.from_dict(
        {
            "fingerprint": {"factory": "example:text"},
            "noise": {"noisy": True, "reasons": ["x"]},
            "status": "incomplete: timeout",
            "memory": {"samples_mb": [1, 2.5]},
            "stage_roles": {"a": "compute"},
        }
    )
    assert meta.noise == Noise(noisy=True, reasons=["x"]) and meta.status == "incomplete: timeout"
    assert meta.memory.samples_mb == [1, 2.5] and meta.stage_roles == {"a": "compute"}
    assert meta.fingerprint.factory == "example:text" and meta.extra == {}
    assert RunMeta.from_dict({"kind": "served", "serving": {"url": "u"}}).serving.url == "u"


def test_each_kind_is_its_own_class_with_only_its_own_sections():
    """Issue 36: a tagged union on ``kind``; another kind's section is refused, naming it."""
    classes = {k: type(RunMeta.from_dict({"kind": k})) for k in ("profile", "load", "served")}
    assert classes == {"profile": ProfileMeta, "load": LoadMeta, "served": ServedMeta}
    simulated = RunMeta.from_dict({"kind": "simulation", "simulation": {"stable": True}})
    assert isinstance(simulated, SimulationMeta) and not hasattr(simulated, "trace")
    assert set(simulated.to_dict()) == {
        *("format", "version", "kind", "pipeline", "description", "stages", "config", "env"),
        *("created", "timing", "status", "noise", "simulation"),
    }
    with pytest.raises(MetaError, match="field 'trace' must be absent on a load run") as info:
        RunMeta.from_dict({"kind": "load", "trace": {"requests": 5}})
    assert info.value.field == "trace"
    # format 3 wrote every kind's fields, null when not its own: they are left out, not kept
    v3 = {"kind": "load", "trace": None, "stacks": None, "load": {"late_requests": 0}}
    assert RunMeta.from_dict(v3) == LoadMeta(load=LoadMeta.from_dict(v3).load)


def test_sync_policy_is_stage_unless_a_run_says_request():
    assert RunMeta().sync_policy == "stage"  # a CPU run records no sync
    assert RunMeta(timing=Timing(sync=None, warmup=10)).sync_policy == "stage"
    assert RunMeta(timing=Timing(sync="stage")).sync_policy == "stage"
    assert RunMeta(timing=Timing(sync="request")).sync_policy == "request"
    with pytest.raises(MetaError, match="field 'timing.sync'"):
        RunMeta.from_dict({"timing": {"sync": "sometimes"}})


@pytest.mark.parametrize(
    "data, field",
    [
        ({"kind": "batch"}, "kind"),
        ({"config": {"batch_size": "eight"}}, "config.batch_size"),
        ({"status": "finished"}, "status"),
        ({"noise": "high"}, "noise"),
        ({"stages": ["a", "a"]}, "stages"),
        ({"noise": {"noisy": "yes"}}, "noise.noisy"),
        ({"load": []}, "load"),
        ({"config": {"batch_size": 0}}, "config.batch_size"),
        ({"timing": {"requests": 1.5}}, "timing.requests"),
        ({"stages": ["a", 2]}, "stages"),
    ],
)
def test_bad_fields_are_named(data, field):
    with pytest.raises(MetaError) as info:
        RunMeta.from_dict(data)
    assert info.value.field == field
    with pytest.raises(RunRecordError, match=f"run meta: field '{field}'"):
        empty_run(data)


def test_unknown_keys_survive_a_save_and_load(tmp_path):
    run = empty_run({"pipeline": "p", "stages": [], "from_the_future": {"k": [1, 2]}})
    assert run.meta.extra == {"from_the_future": {"k": [1, 2]}}
    back = load_run(save_run(run, tmp_path / "r"))
    assert back.meta.extra == {"from_the_future": {"k": [1, 2]}}
    written = json.loads((tmp_path / "r" / "run.json").read_text())
    assert (
        written["from_the_future"] == {"k": [1, 2]}
        and written["version"] == 4
        and "extra" not in written
    )


def test_format_1_is_migrated_and_newer_is_refused(tmp_path):
    assert migrate({"format": "workbench.run", "version": 1, "pipeline": "p"}) == {
        "format": "workbench.run",
        "version": 4,
        "pipeline": "p",
        "kind": "profile",
        "status": "complete",
    }
    v1 = REPO / "data" / "runs" / "tabular-cuda-bs8-fp32"  # recorded in format 1
    assert json.loads((v1 / "run.json").read_text())["version"] == 1
    run = load_run(v1)
    assert (
        run.meta.status == "complete"
        and run.kind == "profile"
        and run.requests["error_where"].isna().all()
    )
    newer = Path(shutil.copytree(v1, tmp_path / "newer"))
    meta = json.loads((newer / "run.json").read_text()) | {"version": 5}
    (newer / "run.json").write_text(json.dumps(meta))
    with pytest.raises(
        RunRecordError, match="field 'version' is 5, newer than this workbench reads"
    ):
        load_run(newer)


def test_format_2_migrates_to_4_with_the_same_meta_and_only_its_kinds_fields(tmp_path):
    v2 = REPO / "data" / "runs" / "text-cpu-bs8-fp32"  # recorded in format 2
    written = json.loads((v2 / "run.json").read_text())
    assert written["version"] == 2 and "requests_asked" in written["timing"]
    run = load_run(v2)
    assert run.meta.stage_roles["forward"] == "compute" and run.meta.noise.noisy is False
    assert run.meta.config == Config(
        device="cpu", batch_size=8, precision="fp32", options={}, threads=1
    )
    back = load_run(save_run(run, tmp_path / "v4"))
    assert back.meta == run.meta
    v4 = json.loads((tmp_path / "v4" / "run.json").read_text())
    assert v4["version"] == 4 and v4["stage_roles"] == written["stage_roles"]
    assert "serving" not in v4 and "load" not in v4  # sections a profile run has not
    unset = {"extra", *Timing._left_out_when_unset}
    declared = {f.name for f in dataclasses.fields(Timing)} - unset
    assert set(v4["timing"]) == declared and v4["timing"]["sync"] is None
    # every value the version 2 file held is in the version 4 file, unchanged
    assert all(
        v4[k] == v or (isinstance(v, dict) and {i: v4[k][i] for i in v} == v)
        for k, v in written.items()
        if k != "version"
    )


def test_typed_objects_inside_sections_are_checked_and_keep_keys_they_do_not_declare():
    """Issue 35: failures, policies and stacks are typed on decode; a newer writer's keys survive."""
    data = {
        "stages": ["parse"],
        "kind": "load",
        "load": {
            "policy": {"max_batch_size": 4, "max_wait_ms": 5, "later": True},
            "warmup_failures": [
                {"stage": "parse", "type": "E", "message": "m", "where": None, "count": 1, "z": 0}
            ],
        },
    }
    meta = RunMeta.from_dict(data)
    assert meta.load.policy == data["load"]["policy"]
    assert meta.load.warmup_failures == data["load"]["warmup_failures"]
    assert meta.to_dict()["load"]["policy"] == data["load"]["policy"]
    with pytest.raises(MetaError) as info:
        RunMeta.from_dict(data | {"load": {"warmup_failures": [{"stage": "parse"}]}})
    assert str(info.value).startswith(
        "field 'load.warmup_failures' item [0] must have field 'type', got"
    )
    stacks = {"headline": "parse, 90 %", "new": 1, "stages": {"parse": {"more": [2]}}}
    assert RunMeta.from_dict({"stages": ["parse"], "stacks": stacks}).stacks == stacks
