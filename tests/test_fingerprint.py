"""Fingerprints: what a run measured, comparable field by field."""

import pytest

from workbench import PipelineConfig
from workbench.examples import factory
from workbench.fingerprint import differences, factory_spec, fingerprint_of, model_fingerprint
from workbench.record import RunMeta
from workbench.pipeline import resolve_pipeline

BASE = {
    "pipeline": "text",
    "factory": "example:text",
    "options": {},
    "precision": "fp32",
    "device": "cpu",
    "batch_size": 1,
    "threads": 2,
    "torch": "2.13.0",
    "workbench": "0.1.0",
    "host": {"cpu_model": "EPYC", "cores": 2},
    "model": {"params": 10, "hash": "ab"},
    "model_note": None,
}


def test_differences_names_each_field_with_both_values():
    b = BASE | {"batch_size": 8, "precision": "int8", "host": {"cpu_model": "EPYC", "cores": 4}}
    assert differences(BASE, b) == [
        ("precision", "fp32", "int8"),
        ("batch_size", 1, 8),
        ("host.cores", 2, 4),
    ]
    assert differences(BASE, dict(BASE)) == []
    assert differences(BASE, None)[0] == ("pipeline", "text", None)


def test_legacy_runs_get_a_fingerprint_from_config_and_env():
    meta = {
        "pipeline": "text",
        "config": {"batch_size": 8, "device": "cpu", "options": {}, "precision": "int8"},
        "env": {"threads": 2, "torch": "2.13.0+cpu", "cpu_model": "AMD EPYC"},
    }
    fp = fingerprint_of(RunMeta.from_dict(meta))
    assert fp["precision"] == "int8" and fp["threads"] == 2 and fp["model"] == "unknown"
    assert fingerprint_of(RunMeta.from_dict({"fingerprint": BASE})) == BASE


@pytest.mark.parametrize("name", ["tabular", "text", "image"])
def test_shipped_examples_declare_their_models(name):
    pipe = resolve_pipeline(factory(name), PipelineConfig())
    fp = model_fingerprint(pipe.models)
    assert fp != "unknown" and fp["params"] > 0
    other = model_fingerprint(
        resolve_pipeline(factory(name), PipelineConfig(precision="bf16")).models
    )
    assert other["params"] == fp["params"] and other["hash"] != fp["hash"]  # dtypes are in the hash
    assert factory_spec(factory(name)) == f"example:{name}"


def test_recorded_match_refuses_another_model_and_labels_host_differences():
    from workbench.fingerprint import recorded_match

    assert recorded_match(BASE, dict(BASE)) == (True, [])
    assert recorded_match(BASE, BASE | {"model": {"params": 99, "hash": "cd"}}) == (False, [])
    assert recorded_match(BASE, BASE | {"threads": 1}) == (False, [])
    ok, labels = recorded_match(
        BASE, BASE | {"host": {"cpu_model": "Xeon", "cores": 2}, "model": "unknown"}
    )
    assert ok and labels == [
        "recorded with host.cpu_model 'Xeon', here 'EPYC'",
        "recorded with model 'unknown', here {'params': 10, 'hash': 'ab'}",
    ]
