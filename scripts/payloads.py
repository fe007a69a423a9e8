"""An example's request bodies, one per line, for ``workbench load --url --payloads FILE``.

    python scripts/payloads.py --example text --out runs/text-payloads.txt [--count 50000]

The clients then need no model. Used by the served benchmarks (``benchmarks/bench_serve_*.py``)
and the served validation (``research/served/``).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path


def payloads_file(example: str, root: Path, n: int = 50_000) -> Path:
    """``ROOT/EXAMPLE-payloads.txt``: the example's first ``n`` items, one request body per line (made once)."""
    return write_payloads(example, root / f"{example}-payloads.txt", n)


def write_payloads(example: str, path: Path, n: int = 50_000) -> Path:
    from workbench import PipelineConfig
    from workbench.examples import factory
    from workbench.pipeline import resolve_pipeline
    from workbench_serve.protocol import item_bytes

    if not path.exists():
        pipe = resolve_pipeline(factory(example), PipelineConfig(batch_size=1))
        bodies = [item_bytes(x) for x in itertools.islice(pipe.item_iterator(), n)]
        if any(b"\n" in b or b"\r" in b for b in bodies):
            raise RuntimeError(
                f"{example}: an item holds a line break; --payloads takes one line per body"
            )
        path.write_bytes(b"\n".join(bodies) + b"\n")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--count", type=int, default=50_000)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    print(write_payloads(args.example, args.out, args.count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
