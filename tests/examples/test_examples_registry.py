import subprocess
import sys

import pytest

from workbench.errors import PipelineError
from workbench.examples import DATA_ENV, EXAMPLES, data_dir, data_file, factory

from examples_helpers import build

STANDARD_STAGES = ("parse", "hydrate", "preprocess", "forward", "postprocess", "serialize")


def test_four_examples_with_one_line_descriptions():
    assert list(EXAMPLES) == ["tabular", "text", "image", "generate"]
    assert all(isinstance(d, str) and d and "\n" not in d for d in EXAMPLES.values())


def test_unknown_example_names_the_choices():
    with pytest.raises(
        PipelineError,
        match="unknown example 'audio'; choose one of: tabular, text, image, generate",
    ):
        factory("audio")


@pytest.mark.parametrize(
    "name, stages",
    [
        ("tabular", ["parse", "hydrate", "preprocess", "forward", "postprocess", "serialize"]),
        ("text", ["parse", "preprocess", "forward", "postprocess", "serialize"]),
        ("image", ["parse", "preprocess", "forward", "postprocess", "serialize"]),
    ],
)
def test_stages_use_the_standard_names_in_order(name, stages):
    pipe = build(name, batch_size=2)
    assert pipe.name == name and pipe.stage_names == stages and pipe.config.batch_size == 2
    assert set(stages) <= set(STANDARD_STAGES)
    assert pipe.description == EXAMPLES[name]


def test_data_dir_is_the_repo_data_folder_unless_overridden(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert data_dir().name == "data" and (data_dir().parent / "workbench" / "examples").is_dir()
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert data_dir() == tmp_path


@pytest.mark.parametrize("name", ["tabular", "text"])
def test_missing_data_file_says_to_run_make_data(monkeypatch, tmp_path, name):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    with pytest.raises(PipelineError, match="run `make data`"):
        build(name)
    with pytest.raises(PipelineError, match="vocab.txt is missing"):
        data_file("vocab.txt")


def test_importing_examples_does_not_import_torch():
    code = "import sys, workbench.examples; print('torch' in sys.modules, 'PIL' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]
