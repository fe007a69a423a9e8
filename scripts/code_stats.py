"""The package's shape in three numbers: lines, lines over 100 characters, imports inside functions.

    python scripts/code_stats.py [PACKAGE_DIR]
    python scripts/code_stats.py --at COMMIT
    python scripts/code_stats.py --by-issue RANGE

``--at COMMIT`` counts the package as it was at that commit, formatted the way ``ruff format`` formats
the tree today (this repository's ``pyproject.toml``), so that sizes from before and after the tree
was first formatted (commit 35316f4) compare like for like. ``--by-issue RANGE`` (``A..B``) sums the
package's net line change of the commits in RANGE by the first "issue N" their subject names
("other" for none; "ruff format" for a commit that reformats): where the lines came from.

Lines: every line of every ``.py`` file under the package (``wc -l``). Imports: every ``import``
and ``from ... import`` statement but ``from __future__``; "inside functions" counts those under a
``def`` at any depth (they run later and hide a dependency from a reader of the module's top).
"""

from __future__ import annotations

import ast
import collections
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = ("code", "docstring", "comment", "blank")


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


def _line_kinds(rows: list[str], tree: ast.AST) -> collections.Counter:
    """Each line as "code", "docstring", "comment" or "blank" (a docstring: a body's first string)."""
    kinds = [
        "blank" if not r.strip() else "comment" if r.lstrip()[:1] == "#" else "code" for r in rows
    ]
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
            kinds[first.lineno - 1 : first.end_lineno] = ["docstring"] * (
                first.end_lineno - first.lineno + 1
            )
    return collections.Counter(kinds)


def by_issue(revisions: str, repo: Path = REPO) -> dict[str, int]:
    """Net lines added to ``workbench/`` per issue named in the commit subjects of ``revisions``."""
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=@%s", "--numstat", revisions, "--", "workbench"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    net: collections.Counter = collections.Counter()
    issue = "other"
    for line in log.splitlines():
        if line.startswith("@"):
            found = re.search(r"issue (\d+)", line)
            issue = f"issue {found.group(1)}" if found else "other"
            if "ruff format" in line:  # reformatting, whichever issue asked for it
                issue = "ruff format"
        elif line[:1].isdigit():
            added, removed, _ = line.split("\t", 2)
            net[issue] += int(added) - int(removed)
    return dict(net)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--by-issue"] and len(argv) == 2:
        net = by_issue(argv[1])
        for issue, lines in sorted(net.items(), key=lambda kv: -kv[1]):
            print(f"{issue}: {lines:+,}")
        print(f"total: {sum(net.values()):+,}")
        return 0
    if argv[:1] == ["--at"] and len(argv) == 2:
        with tempfile.TemporaryDirectory() as folder:
            print(f"at {argv[1]}, formatted as ruff formats the tree today:")
            return count(formatted_at(argv[1], Path(folder)))
    return count(Path(argv[0]) if argv else REPO / "workbench")


def count(package: Path) -> int:
    """Print the package's lines, its lines over 100 characters and its imports inside functions."""
    lines = long_lines = imports = inside = 0
    kinds: collections.Counter = collections.Counter()
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        rows, tree = text.splitlines(), ast.parse(text)
        lines += len(rows)
        long_lines += sum(len(row) > 100 for row in rows)
        kinds += _line_kinds(rows, tree)
        total, in_function = _imports(tree)
        imports, inside = imports + total, inside + in_function
    print(f"lines: {lines:,}")
    print("  " + ", ".join(f"{kind} {kinds[kind]:,}" for kind in KINDS))
    print(f"lines over 100 characters: {long_lines:,} ({100 * long_lines / max(lines, 1):.1f} %)")
    print(
        f"imports inside functions: {inside:,} of {imports:,} ({100 * inside / max(imports, 1):.1f} %)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
