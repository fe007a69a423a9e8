"""compare records what bf16 and int8 do to the shipped examples' outputs (issue 26, part 3): the same items
for every configuration, fp32 against itself exact, bf16 and int8 measured."""

import pytest

from workbench import PipelineConfig
from workbench.interleave import compare

torch = pytest.importorskip("torch")


def outputs_of(example: str) -> dict[str, dict]:
    torch.set_num_threads(1)
    c = compare(
        example,
        [
            {"precision": "fp32"},
            {"precision": "fp32"},
            {"precision": "bf16"},
            {"precision": "int8"},
        ],
        base=PipelineConfig(threads=1),
        requests=20,
        warmup=4,
        noise_probe=False,
        resamples=100,
    )
    assert [comp["b"] for comp in c.result["comparisons"]] == [1, 2, 3]
    assert c.result["comparisons"][1]["outputs"] is c.result["configs"][2]["outputs"]
    return {i: cfg["outputs"] for i, cfg in enumerate(c.result["configs"])}


def check(found: dict[int, dict]) -> None:
    assert found[0] == {
        "max_abs_error": None,
        "max_rel_error": None,
        "argmax_agreement": None,
        "items": 0,
    }
    assert found[1] == {
        "max_abs_error": 0.0,
        "max_rel_error": 0.0,
        "argmax_agreement": 1.0,
        "items": 24,
    }
    for lowered in (found[2], found[3]):  # bf16, int8: the scores move; the top class mostly stays
        assert lowered["items"] == 24 and 0 < lowered["max_abs_error"] < 0.2
        assert 0.5 <= lowered["argmax_agreement"] <= 1.0


def test_tabular_bf16_and_int8():
    check(outputs_of("tabular"))


@pytest.mark.slow
@pytest.mark.parametrize("example", ["text", "image"])
def test_text_and_image_bf16_and_int8(example):
    check(outputs_of(example))
