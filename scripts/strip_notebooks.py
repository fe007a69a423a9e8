"""Strip outputs, execution counts and widget state from notebooks, so git holds only the source.

    python scripts/strip_notebooks.py                 # every notebook under notebooks/
    python scripts/strip_notebooks.py a.ipynb b.ipynb # just these
    python scripts/strip_notebooks.py --check         # exit 1 if any notebook still has outputs

Kept: cell sources, cell ids, the kernelspec and language info. Removed:
outputs, execution counts, per-cell execution metadata, and the notebook's
saved widget state (``metadata.widgets``), which can run to megabytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")
VOLATILE_NOTEBOOK_METADATA = ("widgets",)


def strip(nb: nbformat.NotebookNode) -> bool:
    """Strip ``nb`` in place; True if anything changed."""
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "code":
            if cell.get("outputs"):
                cell.outputs, changed = [], True
            if cell.get("execution_count") is not None:
                cell.execution_count, changed = None, True
        for key in VOLATILE_CELL_METADATA:
            if key in cell.metadata:
                del cell.metadata[key]
                changed = True
    for key in VOLATILE_NOTEBOOK_METADATA:
        if key in nb.metadata:
            del nb.metadata[key]
            changed = True
    return changed


def notebooks(paths: list[str]) -> list[Path]:
    if paths:
        return [Path(p) for p in paths]
    return sorted(
        p for p in (REPO / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="notebooks (default: notebooks/**/*.ipynb)")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a notebook needs stripping"
    )
    args = parser.parse_args(argv)
    dirty = []
    for path in notebooks(args.paths):
        nb = nbformat.read(path, as_version=4)
        if strip(nb):
            dirty.append(path)
            if not args.check:
                nbformat.write(nb, path)
    verb = "need stripping" if args.check else "stripped"
    for path in dirty:
        print(f"{verb}: {path}")
    return 1 if (args.check and dirty) else 0


if __name__ == "__main__":
    sys.exit(main())
