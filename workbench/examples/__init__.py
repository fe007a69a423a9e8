"""The four shipped example pipelines (:data:`EXAMPLES`), each with a different latency budget.

Every example runs offline on the data shipped in ``workbench/examples/data`` (``make data``
regenerates it). ``factory(name)`` returns ``build(config) -> Pipeline``, whose first stage takes
1..``batch_size`` items and last returns one JSON ``bytes`` response per item. Importing this
package does not import torch.
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
    """The example data shipped inside the package, so a wheel runs the examples."""
    return Path(__file__).resolve().parent / "data"


def data_file(name: str) -> Path:
    """A file of the example data (``$WORKBENCH_DATA``, else the package's), or a PipelineError."""
    path = (Path(os.environ[DATA_ENV]) if os.environ.get(DATA_ENV) else package_data_dir()) / name
    if not path.is_file():
        raise PipelineError(
            f"example data file {path} is missing; run `make data` (python scripts/make_data.py) "
            f"in the repository, or point {DATA_ENV} at a folder holding it"
        )
    return path
