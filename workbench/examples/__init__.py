"""The four shipped example pipelines (:data:`EXAMPLES`), each with a different latency budget.

Offline on the data in ``workbench/examples/data`` (``make data``); ``factory(name)`` returns
``build(config) -> Pipeline``. The examples' shared helpers are here too; it imports no torch.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import PipelineConfig, Range
from ..errors import ConfigError, PipelineError, PrecisionError, is_int
from ..pipeline import Pipeline

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


# the ranges the examples declare for their numeric options (config.option_ranges), checked before a build
SEED = Range(0, 2**63 - 1, integer=True)
SIZE = Range(1, 65_536, integer=True)
TOP_K = Range(1, 1_000, integer=True)


def option(config: PipelineConfig, name: str, default: Any, kind: type = int) -> Any:
    """``config.options[name]`` (or ``default``), checked to be of ``kind`` (its range is declared
    on the factory with :func:`~workbench.config.option_ranges`)."""
    value = config.options.get(name, default)
    if kind is float and is_int(value):
        value = float(value)
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise ConfigError(f"option {name!r} must be {kind.__name__}, got {value!r}")
    return value


def int_list_option(config: PipelineConfig, name: str, default: tuple[int, ...]) -> tuple[int, ...]:
    """A list of positive ints, given as a list (``[256, 128]``) or a string (``"256,128"``)."""
    value = config.options.get(name, default)
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
        try:
            value = [int(v) for v in value]
        except ValueError:
            raise ConfigError(
                f"option {name!r} must be a list of integers, got {config.options[name]!r}"
            ) from None
    if not (isinstance(value, (list, tuple)) and value and all(SIZE.holds(v) for v in value)):
        raise ConfigError(
            f"option {name!r} must be a non-empty list of integers in [1, 65_536], got {value!r}"
        )
    return tuple(value)


def check_batch(batch: Any, example: str) -> list:
    """The first stage's input: a non-empty list of items."""
    if not isinstance(batch, (list, tuple)) or not batch:
        raise ValueError(
            f"example {example}: expected a non-empty list of items, got {type(batch).__name__}"
        )
    return list(batch)


def to_device(tensor, config: PipelineConfig):
    """A host tensor on the config's device; on CUDA with option ``pin_memory`` (default True)
    through page-locked memory, asynchronously."""
    if not config.is_cuda:
        return tensor
    if option(config, "pin_memory", True, bool):
        return tensor.pin_memory().to(config.device, non_blocking=True)
    return tensor.to(config.device)


def example_pipeline(
    example: str, config: PipelineConfig, model, items, smoke: Callable
) -> Pipeline:
    """The example's Pipeline of ``model``, after one tiny forward (``smoke()``): a missing kernel
    is a PrecisionError naming the combination (never a fallback)."""
    try:
        smoke()
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        raise PrecisionError(
            f"example {example}: precision {config.precision} on device {config.device} does not run "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); pick another --precision"
        ) from exc
    return Pipeline(
        example, items=items, description=EXAMPLES[example], config=config, models=[model]
    )


def serialize(responses: list[dict]) -> list[bytes]:
    """The last stage of the text and image examples: one compact JSON ``bytes`` per response."""
    return [json.dumps(r, separators=(",", ":")).encode() for r in responses]


def top_labels(logits, labels: tuple[str, ...], k: int) -> list[list[dict]]:
    """Per row of ``logits``, the ``k`` likeliest ``labels`` as ``{"label", "score"}`` (host)."""
    top = logits.float().softmax(dim=-1).topk(k, dim=-1)
    scores, index = top.values.cpu().tolist(), top.indices.cpu().tolist()
    return [
        [{"label": labels[i], "score": round(s, 6)} for i, s in zip(idx, sc)]
        for idx, sc in zip(index, scores)
    ]
