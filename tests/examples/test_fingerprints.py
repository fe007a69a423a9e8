"""The cached model fingerprints of the shipped examples (``workbench/examples/model_fingerprints.json``)
equal fresh builds, cover every shipped recorded run, and are never used where they could be wrong."""

from __future__ import annotations

import json
from importlib import metadata

import pytest

from workbench.config import PipelineConfig
from workbench.examples import data_dir, fingerprints
from workbench.examples.fingerprints import CACHE_FILE, cached, compute, entry_key, recorded_configs

torch = pytest.importorskip("torch")

ENTRIES = json.loads(CACHE_FILE.read_text(encoding="utf-8"))["entries"]
RUNS = data_dir() / "runs"


def _config(entry: dict) -> PipelineConfig:
    return PipelineConfig(
        device=entry["device"],
        batch_size=entry["batch_size"],
        precision=entry["precision"],
        options=entry["options"],
    )


@pytest.mark.parametrize(
    "entry",
    ENTRIES,
    ids=lambda e: f"{e['example']}-{e['device']}-bs{e['batch_size']}-{e['precision']}",
)
def test_every_cached_entry_equals_a_fresh_build(entry):
    """A model change without `python -m workbench.examples.fingerprints --write` fails here."""
    from workbench.device import available_devices

    if entry["device"].split(":")[0] not in available_devices():
        pytest.skip(f"written on a machine with {entry['device']}; none here")
    config = _config(entry)
    assert entry_key(entry["example"], config) | compute(entry["example"], config) == entry


def test_every_shipped_recorded_run_with_a_model_is_cached():
    """A recorded run added to data/runs without rewriting the cache would cost a build (and torch) per kernel."""
    configs = recorded_configs(RUNS)
    assert len(configs) == len(ENTRIES) == 24
    for example, config in configs:
        assert cached(example, config) is not None, (example, config)


def _recorded_model(name: str) -> dict:
    return json.loads((RUNS / name / "run.json").read_text())["fingerprint"]["model"]


def test_a_hit_is_the_recorded_runs_model():
    assert cached("text", PipelineConfig(threads=1)) == {
        "pipeline": "text",
        "model": _recorded_model("text-cpu-bs1-fp32"),
    }
    assert cached("text", PipelineConfig(batch_size=8, precision="int8")) == {
        "pipeline": "text",
        "model": _recorded_model("text-cpu-bs8-int8"),
    }
    assert _recorded_model("text-cpu-bs8-int8") == {"params": 1838420, "hash": "0ba30bf339e1c6b1"}


def test_the_cache_is_never_used_for_a_factory_or_an_unlisted_configuration():
    from workbench.examples import text

    assert cached(text.build, PipelineConfig()) is None  # a factory, even the example's own: built
    assert cached("text", PipelineConfig(batch_size=32)) is None
    assert cached("text", PipelineConfig(options={"layers": 2})) is None
    assert cached("text", PipelineConfig(precision="fp16")) is None


def test_another_vocabulary_or_torch_version_misses(tmp_path, monkeypatch):
    config = PipelineConfig()
    (tmp_path / "vocab.txt").write_text((data_dir() / "vocab.txt").read_text() + "extraword\n")
    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path))
    assert cached("text", config) is None  # one more embedding row: another model
    assert cached("image", config) is not None  # its model reads no data file
    monkeypatch.delenv("WORKBENCH_DATA")
    assert cached("text", config) is not None
    real = metadata.version
    monkeypatch.setattr(
        fingerprints.metadata,
        "version",
        lambda name: "2.14.0+cpu" if name == "torch" else real(name),
    )
    assert cached("text", config) is None


def test_a_missing_or_broken_cache_file_is_a_miss(tmp_path):
    assert cached("text", PipelineConfig(), path=tmp_path / "absent.json") is None
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert cached("text", PipelineConfig(), path=broken) is None


def test_the_public_version_drops_the_local_build_part():
    assert fingerprints.torch_public_version() == torch.__version__.split("+")[0]


def test_the_writer_reproduces_the_shipped_file(tmp_path, monkeypatch):
    """Same entries, order and layout (the builds themselves are checked entry by entry above)."""
    monkeypatch.setattr(fingerprints, "compute", lambda example, config: cached(example, config))
    out = tmp_path / "model_fingerprints.json"
    assert len(fingerprints.write(out)) == 24
    assert out.read_text(encoding="utf-8") == CACHE_FILE.read_text(encoding="utf-8")


def test_missing_example_data_is_a_miss_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "WORKBENCH_DATA", str(tmp_path)
    )  # no vocab.txt there: the build names the problem
    assert cached("text", PipelineConfig()) is None
