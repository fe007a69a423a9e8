import io
import json

import pytest

from workbench import PipelineConfig
from workbench.errors import PrecisionError
from workbench.examples import image

from examples_helpers import build, stage_medians, take


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16", "int8"])
def test_runs_a_batch_of_one_and_of_batch_size(precision):
    pipe = build("image", batch_size=3, precision=precision, options={"image_size": 64, "width": 8})
    for n in (1, 3):
        out = pipe(take(pipe, n))
        assert isinstance(out, list) and len(out) == n and all(isinstance(b, bytes) for b in out)
        for response in map(json.loads, out):
            classes = response["classes"]
            assert len(classes) == 5 and all(c["label"] in image.LABELS for c in classes)
            scores = [c["score"] for c in classes]
            assert scores == sorted(scores, reverse=True) and 0.0 < sum(scores) <= 1.0 + 1e-6


def test_items_are_deterministic_distinct_pngs():
    from PIL import Image

    pipe = build("image")
    items = take(pipe, 30)
    assert items == take(pipe, 30)
    assert len(set(items)) == 24 and items[24:] == items[:6]  # a pool of 24, cycled
    assert take(build("image", options={"seed": 1}), 3) != items[:3]
    sizes = [Image.open(io.BytesIO(b)).size for b in items[:24]]
    assert all(256 <= min(s) and max(s) <= 448 for s in sizes) and len(set(sizes)) > 1


def test_preprocess_resizes_crops_and_normalizes():
    import torch

    pipe = build("image", batch_size=2, options={"image_size": 96})
    x = pipe.stages[1].fn(take(pipe, 2))
    assert x.shape == (2, 3, 96, 96) and x.dtype == torch.float32 and x.is_contiguous()
    assert -2.2 < float(x.min()) < 0 < float(x.max()) < 2.7


def test_same_config_gives_the_same_responses():
    a, b = build("image", batch_size=2), build("image", batch_size=2)
    assert a(take(a, 2)) == b(take(b, 2))


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"GIF89a" + b"\0" * 30, "image request 0: not a PNG file"),
        ("not bytes", "expected PNG bytes, got str"),
        (
            image.PNG_SIGNATURE
            + b"\0\0\0\x0dIHDR"
            + (0).to_bytes(4, "big")
            + (5).to_bytes(4, "big"),
            "PNG is 0x5",
        ),
    ],
)
def test_invalid_payload_raises_value_error(payload, message):
    with pytest.raises(ValueError, match=message):
        image.parse([payload])


def test_int8_on_cuda_is_refused_without_touching_a_gpu():
    with pytest.raises(PrecisionError, match="precision int8 on device cuda"):
        image.build(PipelineConfig(device="cuda", precision="int8"))


def test_preprocess_heavy(one_thread):
    med = stage_medians(build("image", batch_size=4), batch_size=4, calls=10)
    share = med["preprocess"] / sum(med.values())
    assert max(med, key=med.get) == "preprocess" and share > 0.4, (share, med)
