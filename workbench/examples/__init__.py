"""The four shipped example pipelines (:data:`EXAMPLES`), each with a different latency budget:
``tabular`` is feature-bound at small batch (``hydrate`` dominates), ``text`` compute-bound
(``forward``), ``image`` preprocess-heavy (decode and resize), and ``generate`` streams its tokens
(``workbench.streaming``: TTFT, ITL, TPOT; with ``kv_cache=false`` each decode step grows with its
position).

Every example runs offline: the feature store and vocabulary ship in ``workbench/examples/data``
(copied to ``data/`` for the notebooks; ``make data`` regenerates both). ``factory(name)`` returns
``build(config) -> Pipeline``: its first stage takes 1..``batch_size`` items, the last returns one
JSON ``bytes`` response per item. Importing this package does not import torch.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import PipelineError

EXAMPLES: dict[str, str] = {
    "tabular": "ranking request -> SQLite feature hydration -> MLP -> calibrated score (feature-bound)",
    "text": "raw text -> wordpiece tokenizer -> transformer encoder -> top-k labels (compute-bound)",
    "image": "PNG bytes -> decode, resize, normalize -> small CNN -> top-k classes (preprocess-heavy)",
    "generate": "prompt ids -> causal transformer streaming tokens (kv_cache on/off) -> JSON (generative)",
}

DATA_ENV = "WORKBENCH_DATA"

__all__ = ["EXAMPLES", "DATA_ENV", "data_dir", "data_file", "factory"]


def factory(name: str) -> Callable:
    """The factory ``build(config) -> Pipeline`` of a shipped example."""
    if name not in EXAMPLES:
        raise PipelineError(f"unknown example {name!r}; choose one of: {', '.join(EXAMPLES)}")
    module = importlib.import_module(f"{__name__}.{name}")
    return module.build


def data_dir() -> Path:
    """The repository's data folder (recorded runs, traces): ``$WORKBENCH_DATA``, else ``data/``."""
    return Path(os.environ.get(DATA_ENV) or Path(__file__).resolve().parents[2] / "data")


def package_data_dir() -> Path:
    """The example data shipped inside the package (``workbench/examples/data``), so a wheel runs the examples."""
    return Path(__file__).resolve().parent / "data"


def data_file(name: str) -> Path:
    """A file of the example data (``$WORKBENCH_DATA``, else the package's copy), or a PipelineError saying how to create it."""
    path = (Path(os.environ[DATA_ENV]) if os.environ.get(DATA_ENV) else package_data_dir()) / name
    if not path.is_file():
        raise PipelineError(
            f"example data file {path} is missing; run `make data` (python scripts/make_data.py) "
            f"in the repository, or point {DATA_ENV} at a folder holding it"
        )
    return path
