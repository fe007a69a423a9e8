import itertools

import pytest

from workbench import Pipeline, PipelineConfig, load_factory
from workbench.errors import ConfigError, PipelineError, PrecisionError
from workbench.pipeline import Stage, build_pipeline


def test_decorator_forms_keep_order_and_names():
    pipe = Pipeline("p", items=lambda: itertools.count())

    @pipe.stage
    def parse(b):
        return [x + 1 for x in b]

    @pipe.stage("forward")
    def run_model(b):
        return sum(b)

    assert pipe.stage_names == ["parse", "forward"]
    assert pipe([1, 2]) == 5


def test_duplicate_and_bad_stage_names():
    pipe = Pipeline("p")
    pipe.add("parse", lambda b: b)
    with pytest.raises(ConfigError, match="already has a stage named 'parse'"):
        pipe.add("parse", lambda b: b)
    with pytest.raises(ConfigError, match="stage name"):
        Stage("", lambda b: b)
    with pytest.raises(ConfigError, match="must be callable"):
        Stage("x", 3)


def test_items_iterable_is_cycled_and_missing_items_is_an_error():
    pipe = Pipeline("p", items=[1, 2])
    assert list(itertools.islice(pipe.item_iterator(), 5)) == [1, 2, 1, 2, 1]
    with pytest.raises(PipelineError, match="no item source"):
        Pipeline("q").item_iterator()


def test_config_validation():
    assert PipelineConfig(batch_size=4).replace(precision="bf16").precision == "bf16"
    for kwargs, match in [
        ({"device": "tpu"}, "device must be"),
        ({"batch_size": 0}, "batch_size must be"),
        ({"batch_size": True}, "batch_size must be"),
        ({"precision": "fp8"}, "precision must be one of"),
    ]:
        with pytest.raises(ConfigError, match=match):
            PipelineConfig(**kwargs)
    cfg = PipelineConfig(batch_size=2, options={"k": 1})
    assert PipelineConfig.from_dict(cfg.to_dict()) == cfg


FACTORY = """
import itertools
from workbench import Pipeline
def build(config):
    p = Pipeline("file", items=lambda: itertools.count())
    p.add("parse", lambda b: b)
    return p
def broken(config):
    raise RuntimeError("model file missing")
def not_a_pipeline(config):
    return 42
"""


def test_load_factory_from_file_and_module(tmp_path, monkeypatch):
    f = tmp_path / "mine.py"
    f.write_text(FACTORY)
    assert build_pipeline(load_factory(f"{f}:build"), PipelineConfig()).name == "file"
    assert load_factory(str(f)).__name__ == "build"
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_factory("mine:build").__name__ == "build"


@pytest.mark.parametrize(
    "spec, match",
    [
        ("no_such_module_xyz:build", "no module named 'no_such_module_xyz'"),
        ("/nope/missing.py:build", "does not exist"),
        ("{file}:missing", "has no attribute 'missing'"),
    ],
)
def test_load_factory_errors(tmp_path, spec, match):
    f = tmp_path / "mine.py"
    f.write_text(FACTORY)
    with pytest.raises(PipelineError, match=match):
        load_factory(spec.format(file=f))


def test_build_pipeline_wraps_factory_failures(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text(FACTORY)
    with pytest.raises(PipelineError, match="failed: RuntimeError: model file missing"):
        build_pipeline(load_factory(f"{f}:broken"), PipelineConfig())
    with pytest.raises(PipelineError, match="returned int"):
        build_pipeline(load_factory(f"{f}:not_a_pipeline"), PipelineConfig())


def test_precision_errors_pass_through_unchanged():
    def factory(config):
        raise PrecisionError("precision fp16 on device cpu: no kernel")

    with pytest.raises(PrecisionError, match="fp16 on device cpu"):
        build_pipeline(factory, PipelineConfig())
