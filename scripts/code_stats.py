"""The package's shape in three numbers: lines, lines over 100 characters, imports inside functions.

    python scripts/code_stats.py [PACKAGE_DIR]
    python scripts/code_stats.py --at COMMIT

``--at COMMIT`` counts the package as it was at that commit, formatted the way ``ruff format`` formats
the tree today (this repository's ``pyproject.toml``), so that sizes from before and after the tree
was first formatted (commit 35316f4) compare like for like.

Lines: every line of every ``.py`` file under the package (``wc -l``). Imports: every ``import``
and ``from ... import`` statement but ``from __future__``; "inside functions" counts those under a
``def`` at any depth (they run later and hide a dependency from a reader of the module's top).
"""

from __future__ import annotations

import ast
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _imports(tree: ast.AST) -> tuple[int, int]:
    """(all import statements, those inside a function) of one module."""
    total = inside = 0

    def walk(node: ast.AST, in_function: bool) -> None:
        nonlocal total, inside
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                if isinstance(child, ast.ImportFrom) and child.module == "__future__":
                    continue
                total += 1
                inside += in_function
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    walk(tree, False)
    return total, inside


def formatted_at(commit: str, folder: Path, repo: Path = REPO) -> Path:
    """The package at ``commit`` unpacked into ``folder`` and formatted with today's ruff settings."""
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", commit, "workbench"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    shutil.copy(REPO / "pyproject.toml", folder / "pyproject.toml")
    ruff = [sys.executable, "-m", "ruff", "format", "--no-cache", "--quiet", "workbench"]
    subprocess.run(ruff, cwd=folder, check=True)
    return folder / "workbench"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--at"] and len(argv) == 2:
        with tempfile.TemporaryDirectory() as folder:
            print(f"at {argv[1]}, formatted as ruff formats the tree today:")
            return count(formatted_at(argv[1], Path(folder)))
    return count(Path(argv[0]) if argv else REPO / "workbench")


def count(package: Path) -> int:
    """Print the package's lines, its lines over 100 characters and its imports inside functions."""
    lines = long_lines = imports = inside = 0
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        rows = text.splitlines()
        lines += len(rows)
        long_lines += sum(len(row) > 100 for row in rows)
        total, in_function = _imports(ast.parse(text))
        imports, inside = imports + total, inside + in_function
    print(f"lines: {lines:,}")
    print(f"lines over 100 characters: {long_lines:,} ({100 * long_lines / max(lines, 1):.1f} %)")
    print(
        f"imports inside functions: {inside:,} of {imports:,} ({100 * inside / max(imports, 1):.1f} %)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
