"""Example ``image``: classify photos sent as PNG (or JPEG) ``bytes``. Preprocess-heavy.

Requests cycle through a pool of synthetic photo-like PNGs (256 to 448 pixels a side) drawn from a
seed: no downloads. Stages: ``parse`` (the PNG or JPEG header's size checked), ``preprocess``
(decode with Pillow, resize the short side to ``image_size``, center-crop, ImageNet-normalize,
NCHW to the device; ``describe=`` reports ``decoded_pixels``, which decode and resize grow with),
``forward`` (a seeded random CNN of four stride-2 conv blocks; int8 quantizes only its linear
head), ``postprocess`` (top-k classes) and ``serialize``.

Options (``config.options``):
    seed (int, 0): weights and image pool.
    image_size (int, 128): model input side in pixels.
    width (int, 24): channels of the first conv block (doubling per block).
    pool (int, 24): distinct images in the request stream.
    top_k (int, 5): classes per response.
    pin_memory (bool, True): on CUDA, pinned host memory and non_blocking copy.
"""

from __future__ import annotations

import functools
import io
import itertools
import struct

import numpy as np

from ..config import PipelineConfig, Range, option_ranges
from ..pipeline import Pipeline
from ..precision import check_precision, prepare_model, torch_dtype
from . import (
    SEED,
    TOP_K,
    check_batch,
    example_pipeline,
    option,
    serialize,
    to_device,
    top_labels,
)

LABELS = tuple(
    "cat dog bird car bicycle tree flower house boat mountain beach food person bus train "
    "airplane chair cup book clock".split()
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"
JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start of frame, not DHT/JPG/DAC
MAX_SIDE = 8192
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


@option_ranges(
    seed=SEED,
    image_size=Range(16, 4_096, integer=True),
    width=Range(1, 4_096, integer=True),
    pool=Range(1, 100_000, integer=True),
    top_k=TOP_K,
)
def build(config: PipelineConfig) -> Pipeline:
    """The image pipeline for ``config`` (see the module docstring for stages and options)."""
    import torch  # 1-2 s and 300 MB: only when the pipeline is built

    check_precision(config)  # first: an impossible combination fails before any work
    seed, size = option(config, "seed", 0), option(config, "image_size", 128)
    width, pool = option(config, "width", 24), option(config, "pool", 24)
    top_k = min(option(config, "top_k", 5), len(LABELS))
    option(config, "pin_memory", True, bool)
    photos = png_pool(seed, pool)
    torch.manual_seed(seed)
    model = prepare_model(_cnn(width, len(LABELS)), config)
    dtype = torch_dtype(config.precision)
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) * 255.0 for v in (MEAN, STD))

    def preprocess(pngs: list[bytes]):
        decoded, area = _decode_batch(pngs, size)
        pixels = torch.from_numpy(decoded)  # (batch, size, size, 3) uint8
        # NCHW copy first: elementwise math on the permuted view takes a slower strided path
        # (2x on an idle 2-core CPU here, far worse when the cores are busy).
        x = (pixels.permute(0, 3, 1, 2).contiguous().float() - mean) / std
        out = to_device(x.to(dtype), config)
        out.decoded_pixels = area  # read by describe=, after the request's clock reads
        return out

    def forward(x):
        with torch.inference_mode():
            return model(x)

    def postprocess(logits):
        with torch.inference_mode():
            return [{"classes": c} for c in top_labels(logits, LABELS, top_k)]

    probe = torch.zeros(1, 3, size, size, dtype=dtype, device=config.device)
    pipe = example_pipeline(
        "image", config, model, lambda: itertools.cycle(photos), lambda: forward(probe)
    )
    pipe.add("parse", parse)
    # describe=: the batch's decoded image area (pixels, before the resize)
    pipe.add(
        "preprocess", preprocess, describe=lambda x: {"decoded_pixels": float(x.decoded_pixels)}
    )
    pipe.add("forward", forward)
    pipe.add("postprocess", postprocess)
    pipe.add("serialize", serialize)
    return pipe


def _cnn(width: int, classes: int):
    import torch.nn as nn  # loaded with torch by build

    layers, cin = [], 3
    for i in range(4):
        cout = width * 2**i
        layers += [
            nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
        ]
        cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


def parse(batch: list) -> list[bytes]:
    """Check each item is a PNG or JPEG of sane size; ValueError names the request."""
    return [_check_png(i, b) for i, b in enumerate(check_batch(batch, "image"))]


def _check_png(index: int, data) -> bytes:
    where = f"image request {index}"
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError(f"{where}: expected PNG bytes, got {type(data).__name__}")
    data = bytes(data)
    if data.startswith(JPEG_SIGNATURE):
        kind, (w, h) = "JPEG", _jpeg_size(data, where)
    elif len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise ValueError(f"{where}: not a PNG file (bad signature or header; JPEG is accepted too)")
    else:
        kind, (w, h) = "PNG", struct.unpack(">II", data[16:24])
    if not (0 < w <= MAX_SIDE and 0 < h <= MAX_SIDE):
        raise ValueError(f"{where}: {kind} is {w}x{h}, sides must be 1..{MAX_SIDE}")
    return data


def _jpeg_size(data: bytes, where: str) -> tuple[int, int]:
    """(width, height) from the first start-of-frame segment of a JPEG; ValueError when there is none."""
    i = 2
    while i + 9 <= len(data):
        if data[i] != 0xFF:
            break
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in JPEG_FRAMES:
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return w, h
        i += 2 + struct.unpack(">H", data[i + 2 : i + 4])[0]
    raise ValueError(f"{where}: JPEG without a frame header (truncated or not a JPEG)")


def _decode_batch(pngs: list[bytes], size: int):
    """Decoded, resized and center-cropped uint8 (batch, size, size, 3), and the decoded pixels."""
    from PIL import Image  # Pillow (optional): only where images are decoded

    out = np.empty((len(pngs), size, size, 3), dtype=np.uint8)
    area = 0
    for i, data in enumerate(pngs):
        with Image.open(io.BytesIO(data)) as img:
            rgb = img.convert("RGB")
        w, h = rgb.size
        area += w * h
        scale = size / min(w, h)
        rw, rh = max(size, round(w * scale)), max(size, round(h * scale))
        left, top = (rw - size) // 2, (rh - size) // 2
        out[i] = np.asarray(
            rgb.resize((rw, rh), Image.BILINEAR).crop((left, top, left + size, top + size))
        )
    return out, area


@functools.lru_cache(maxsize=4)
def png_pool(seed: int, count: int) -> tuple[bytes, ...]:
    """``count`` deterministic photo-like PNGs (cached: the same seed gives the same bytes)."""
    from PIL import Image  # Pillow (optional): only where images are drawn

    rng, pngs = np.random.default_rng(seed), []
    for _ in range(count):
        buf = io.BytesIO()
        Image.fromarray(_synthetic_photo(rng), "RGB").save(buf, format="PNG")
        pngs.append(buf.getvalue())
    return tuple(pngs)


def _synthetic_photo(rng):
    """An RGB uint8 array: a two-colour gradient sky/ground, a few soft ellipses, sensor noise."""
    h, w = (int(v) for v in rng.integers(256, 449, 2))
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = rng.uniform(0, np.pi)
    t = ((x * np.cos(angle) + y * np.sin(angle)) / (w + h) + 0.5)[..., None]
    c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    img = c0 * (1 - t) + c1 * t
    for _ in range(int(rng.integers(3, 7))):
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        ry, rx = rng.uniform(20, h / 3), rng.uniform(20, w / 3)
        d = ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2
        alpha = np.clip(1.5 - d, 0, 1)[..., None]
        img = img * (1 - alpha) + rng.uniform(0, 255, 3) * alpha
    img += rng.normal(0, 4.0, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)
