"""The package's shape in three numbers: lines, lines over 100 characters, imports inside functions.

    python scripts/code_stats.py [PACKAGE_DIR]
    python scripts/code_stats.py --at COMMIT
    python scripts/code_stats.py --by-issue RANGE
    python scripts/code_stats.py --functions [PACKAGE_DIR]

Without an argument: the core (``workbench/``), then each wing (``workbench_serve/``,
``workbench_room/``, ``workbench_redis/``: packages beside the core, issue 36), then all together.

``--at COMMIT`` counts the package as it was at that commit, formatted the way ``ruff format`` formats
the tree today (this repository's ``pyproject.toml``), so that sizes from before and after the tree
was first formatted (commit 35316f4) compare like for like. ``--by-issue RANGE`` (``A..B``) sums the
package's net line change of the commits in RANGE by the first "issue N" their subject names
("other" for none; "ruff format" for a commit that reformats): where the lines came from, each
split into the core and the wings (a file's part by the path it had then: ``workbench/serving/``,
``workbench/otel/``, ``workbench/room/``, the served CLI modules and the Redis store were the wings'
before they moved out). ``--functions`` lists the functions over 60 lines and those over 8
parameters (``self`` and ``cls`` not counted) of the core, or of PACKAGE_DIR (issue 36: none in the core).

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


# paths inside workbench/ that were a wing's before issue 36 moved them out
WING_PATHS = re.compile(
    r"^workbench/(serving|otel|room)/|^workbench/cli/(serve|load_http|locust_worker|ingest_otel)\.py$"
    r"|^workbench/examples/_feature_redis\.py$|^workbench_"
)


def part_of(path: str) -> str:
    """``"core"`` or ``"wings"`` for a path of the repository (at any commit)."""
    return "wings" if WING_PATHS.search(path) else "core"


def by_issue_parts(revisions: str, repo: Path = REPO) -> dict[str, collections.Counter]:
    """Net lines added per issue named in the commit subjects of ``revisions``, per part (core, wings)."""
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--no-renames", "--format=@%s", "--numstat", revisions]
        + ["--", "workbench", "workbench_*"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    net: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    issue = "other"
    for line in log.splitlines():
        if line.startswith("@"):
            found = re.search(r"issue (\d+)", line)
            issue = f"issue {found.group(1)}" if found else "other"
            if "ruff format" in line:  # reformatting, whichever issue asked for it
                issue = "ruff format"
        elif line[:1].isdigit():
            added, removed, path = line.split("\t", 2)
            if path.endswith(".py"):
                net[issue][part_of(path)] += int(added) - int(removed)
    return dict(net)


def by_issue(revisions: str, repo: Path = REPO) -> dict[str, int]:
    """Net lines added to the core and the wings together per issue named in ``revisions``' subjects."""
    return {issue: sum(parts.values()) for issue, parts in by_issue_parts(revisions, repo).items()}


def long_functions(package: Path, lines: int = 60, params: int = 8) -> tuple[list[str], list[str]]:
    """``(over `lines` lines, over `params` parameters)``: ``path:line name (N)`` of each function."""
    long, many = [], []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            n = (
                len(a.posonlyargs)
                + len(a.args)
                + len(a.kwonlyargs)
                + bool(a.vararg)
                + bool(a.kwarg)
            )
            n -= bool(a.args) and a.args[0].arg in ("self", "cls")
            size = node.end_lineno - node.lineno + 1
            where = f"{path.relative_to(package.parent)}:{node.lineno} {node.name}"
            long += [f"{where} ({size} lines)"] if size > lines else []
            many += [f"{where} ({n} parameters)"] if n > params else []
    return long, many


def main(argv: list[str]) -> int:
    if argv[:1] == ["--functions"] and len(argv) <= 2:
        long, many = long_functions(Path(argv[1]) if len(argv) == 2 else REPO / "workbench")
        print(f"functions over 60 lines: {len(long)}", *long, sep="\n  ")
        print(f"functions over 8 parameters: {len(many)}", *many, sep="\n  ")
        return 0
    if argv[:1] == ["--by-issue"] and len(argv) == 2:
        net = by_issue_parts(argv[1])
        for issue, parts in sorted(net.items(), key=lambda kv: -sum(kv[1].values())):
            print(
                f"{issue}: {sum(parts.values()):+,} (core {parts['core']:+,}, wings {parts['wings']:+,})"
            )
        core, wings = (sum(p[k] for p in net.values()) for k in ("core", "wings"))
        print(f"total: {core + wings:+,} (core {core:+,}, wings {wings:+,})")
        return 0
    if argv[:1] == ["--at"] and len(argv) == 2:
        with tempfile.TemporaryDirectory() as folder:
            print(f"at {argv[1]}, formatted as ruff formats the tree today:")
            return count(formatted_at(argv[1], Path(folder)))
    if argv:
        return count(Path(argv[0]))
    packages = [REPO / "workbench", *sorted(REPO.glob("workbench_*/"))]
    for package in packages:
        print(f"{'core' if package.name == 'workbench' else 'wing'} {package.name}/")
        count(package, indent="  ")
    print("all together")
    return count(*packages, indent="  ")


def count(*packages: Path, indent: str = "") -> int:
    """Print the packages' lines (together), lines over 100 characters and imports inside functions."""
    lines = long_lines = imports = inside = 0
    kinds: collections.Counter = collections.Counter()
    for path in sorted(p for folder in packages for p in folder.rglob("*.py")):
        text = path.read_text()
        rows, tree = text.splitlines(), ast.parse(text)
        lines += len(rows)
        long_lines += sum(len(row) > 100 for row in rows)
        kinds += _line_kinds(rows, tree)
        total, in_function = _imports(tree)
        imports, inside = imports + total, inside + in_function
    print(f"{indent}lines: {lines:,}")
    print(f"{indent}  " + ", ".join(f"{kind} {kinds[kind]:,}" for kind in KINDS))
    share = 100 * long_lines / max(lines, 1)
    print(f"{indent}lines over 100 characters: {long_lines:,} ({share:.1f} %)")
    share = 100 * inside / max(imports, 1)
    print(f"{indent}imports inside functions: {inside:,} of {imports:,} ({share:.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
