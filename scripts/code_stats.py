"""The package's shape in three numbers: lines, lines over 100 characters, imports inside functions.

    python scripts/code_stats.py [PACKAGE_DIR]

Lines: every line of every ``.py`` file under the package (``wc -l``). Imports: every ``import``
and ``from ... import`` statement but ``from __future__``; "inside functions" counts those under a
``def`` at any depth (they run later and hide a dependency from a reader of the module's top).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


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


def main(argv: list[str]) -> int:
    package = Path(argv[0] if argv else Path(__file__).resolve().parents[1] / "workbench")
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
