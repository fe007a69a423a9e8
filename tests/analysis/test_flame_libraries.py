"""Library shares of a stage from the Python frames of a flame tree."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.analysis.flame import library_of, library_shares
from workbench.roles import evidence_role


def tree(rows):
    """rows: (id, parent, name, kind, total_ns)"""
    return pd.DataFrame(rows, columns=["id", "parent", "name", "kind", "total_ns"])


def test_outermost_library_frames_count_once_per_stage():
    t = tree(
        [
            (0, -1, "ProfilerStep", "user_annotation", 1000),
            (1, 0, "preprocess", "stage", 100),
            (2, 1, "image.py(69): preprocess", "python", 95),
            (3, 2, "PIL/Image.py(900): convert", "python", 40),
            (4, 3, "PIL/Image.py(100): load", "python", 30),  # inside PIL: not counted again
            (5, 2, "PIL/Image.py(2200): resize", "python", 20),
            (6, 1, "aten::to", "cpu_op", 5),
            (7, 0, "hydrate", "stage", 50),
            (8, 7, "<built-in method execute of sqlite3.Cursor object at 0x1>", "python", 45),
            (9, -1, "PIL/Image.py(1): open", "python", 7),  # outside any stage: ignored
        ]
    )
    shares = library_shares(t)
    assert shares == {"preprocess": {"PIL": 0.6, "torch": 0.05}, "hydrate": {"sqlite3": 0.9}}
    assert evidence_role(shares["hydrate"]) == ("io", "sqlite3", 0.9)
    assert evidence_role({"PIL": 0.49}) is None


def test_torch_operators_outside_library_frames_are_torch_and_inside_count_once():
    t = tree(
        [
            (0, -1, "decode", "stage", 200),
            (1, 0, "generate.py(40): decode", "python", 190),
            (2, 1, "aten::linear", "cpu_op", 120),
            (3, 2, "aten::addmm", "cpu_op", 100),  # inside an operator: counted once
            (4, 1, "torch/nn/modules/module.py(1): _call_impl", "python", 60),
            (5, 4, "aten::softmax", "cpu_op", 50),  # inside a torch frame: counted once
            (6, 0, "PIL/Image.py(1): resize", "python", 10),
            (7, 6, "aten::to", "cpu_op", 5),  # inside PIL: PIL's
        ]
    )
    assert library_shares(t) == {"decode": {"torch": 0.9, "PIL": 0.05}}
    assert evidence_role(library_shares(t)["decode"]) == ("compute", "torch", 0.9)


@pytest.mark.parametrize(
    "name, lib",
    [
        ("PIL/PngImagePlugin.py(10): load", "PIL"),
        ("socket.py(700): recv", "socket"),
        ("redis/client.py(5): get", "redis"),
        ("mycode.py(3): f", None),
        ("<built-in function dumps>", None),
        ("orjson/__init__.py(1): x", "orjson"),
        ("json/encoder.py(200): encode", "json"),
        ("torchvision/transforms/functional.py(9): resize", "torchvision"),
        ("torch/nn/modules/linear.py(125): forward", "torch"),
    ],
)
def test_library_of(name, lib):
    assert library_of(name) == lib


def test_acceptance_pil_covers_half_of_image_preprocess(tmp_path):
    """On the image example, PIL frames under preprocess cover at least half of that stage's time."""
    pytest.importorskip("torch")
    from workbench import PipelineConfig, profile
    from workbench.analysis.flame import flame_tree
    from workbench.trace import load_trace

    run = profile("image", PipelineConfig(batch_size=1, threads=1), requests=3, warmup=1, traced=3)
    try:
        shares = library_shares(flame_tree(load_trace(run.trace_path).events))
    finally:
        run.save(tmp_path / "r")
    assert shares["preprocess"]["PIL"] >= 0.5
