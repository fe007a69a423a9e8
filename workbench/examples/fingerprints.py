"""Model fingerprints of the shipped examples, cached so that a recorded first view needs no torch.

The latency explorer shows a recorded run only when a live run's fingerprint would equal it, and
computing one builds the pipeline. ``model_fingerprints.json`` keys them by :data:`KEY_FIELDS`;
``--write`` rebuilds it, and ``tests/examples/test_fingerprints.py`` checks every entry.
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..device import available_devices
from ..errors import PipelineError
from ..fingerprint import fingerprint_of, model_fingerprint
from ..pipeline import resolve_pipeline
from ..record import META_FILE, read_meta
from . import EXAMPLES, data_dir, data_file, factory

CACHE_FILE = Path(__file__).with_name("model_fingerprints.json")
MODEL_DATA: dict[str, tuple[str, ...]] = {"text": ("vocab.txt",)}  # the rest: none
KEY_FIELDS = ("example", "options", "precision", "device", "batch_size", "torch", "data")


def torch_public_version() -> str | None:
    """The installed torch's version without its local part (``2.13.0``), not importing torch."""
    try:
        return metadata.version("torch").split("+", 1)[0]
    except metadata.PackageNotFoundError:
        return None


def entry_key(example: str, config: PipelineConfig) -> dict[str, Any]:
    """The key fields of ``example`` built with ``config`` on this installation."""
    return {
        "example": example,
        "options": dict(config.options),
        "precision": config.precision,
        "device": config.device,
        "batch_size": config.batch_size,
        "torch": torch_public_version(),
        "data": {  # sha256[:16] of the data files that shape the model
            name: hashlib.sha256(data_file(name).read_bytes()).hexdigest()[:16]
            for name in MODEL_DATA.get(example, ())
        },
    }


def _canonical(key: dict[str, Any]) -> str:
    return json.dumps({k: key[k] for k in KEY_FIELDS}, sort_keys=True)


@functools.lru_cache(maxsize=4)
def _index(path: str, mtime_ns: int) -> dict[str, dict[str, Any]]:
    entries = json.loads(Path(path).read_text(encoding="utf-8"))["entries"]
    return {_canonical(e): {"pipeline": e["pipeline"], "model": e["model"]} for e in entries}


def cached(example: Any, config: PipelineConfig, path: Path | None = None) -> dict[str, Any] | None:
    """``{"pipeline", "model"}`` a build of the shipped ``example`` would give, from the cache;
    None when it is not there (or torch is not installed)."""
    if not isinstance(example, str) or example not in EXAMPLES:
        return None
    path = Path(path or CACHE_FILE)
    try:
        index = _index(str(path), path.stat().st_mtime_ns)
        key = entry_key(example, config)
        hit = index.get(_canonical(key)) if key["torch"] is not None else None
    # PipelineError: example data missing
    except (OSError, ValueError, KeyError, TypeError, PipelineError):
        return None
    return copy.deepcopy(hit)


def compute(example: str, config: PipelineConfig) -> dict[str, Any]:
    """``{"pipeline", "model"}`` of ``example`` built with ``config`` (imports torch, builds the model)."""
    pipe = resolve_pipeline(factory(example), config)
    return {"pipeline": pipe.name, "model": model_fingerprint(list(pipe.models))}


def recorded_configs(runs: Path) -> list[tuple[str, PipelineConfig]]:
    """(example, configuration) of the recorded runs with a model fingerprint, on this machine's
    devices."""
    here, found = available_devices(), {}
    for meta_file in sorted(Path(runs).glob(f"*/{META_FILE}")):
        fp = fingerprint_of(read_meta(meta_file))
        example = str(fp.get("factory") or "").removeprefix("example:")
        if not isinstance(fp.get("model"), dict) or example not in EXAMPLES:
            continue
        if str(fp.get("device") or "cpu").split(":")[0] not in here:
            continue
        config = PipelineConfig.from_dict(fp | {"threads": None})  # threads shape no model
        found.setdefault(_canonical(entry_key(example, config)), (example, config))
    return list(found.values())


def write(path: Path = CACHE_FILE, runs: Path | None = None) -> list[dict[str, Any]]:
    """Build every configuration of the recorded runs (``data/runs``) and write the cache file."""
    configs = recorded_configs(runs or data_dir() / "runs")
    found = [entry_key(example, config) | compute(example, config) for example, config in configs]
    # one line per entry: readable diffs
    rows = ",\n".join("  " + json.dumps(e, sort_keys=True) for e in found)
    path.write_text(
        '{"about": "model fingerprints of the shipped examples; '
        'python -m workbench.examples.fingerprints --write",\n "entries": [\n' + rows + "\n]}\n",
        encoding="utf-8",
    )
    return found


def main(argv: list[str] | None = None) -> int:
    """``--write``: rebuild the cache (tests/examples/test_fingerprints.py checks it)."""
    parser = argparse.ArgumentParser(
        prog="python -m workbench.examples.fingerprints", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--write",
        action="store_true",
        required=True,
        help="build the recorded runs' configurations, write the cache",
    )
    parser.add_argument(
        "--runs", type=Path, default=None, help="recorded run folders (default: data/runs)"
    )
    args = parser.parse_args(argv)
    found = write(runs=args.runs)
    print(f"wrote {len(found)} model fingerprints to {CACHE_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
