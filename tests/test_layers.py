"""The package's layers, enforced: data flows one way, collect -> record -> analyse -> present.

Every module under ``workbench/`` is parsed with ``ast`` (nothing is imported), and every
import counts, at module level and inside functions alike: an import inside a function
runs later, but it still ties the two modules together. The test fails on

- an import going UP a layer (``analysis`` importing ``plots``, ``widgets`` being imported
  by ``room``...); imports within one layer, or down, are fine;
- an import cycle between modules, whatever the layers (two modules that import each other
  through any chain, one of the imports inside a function or not).

The layer map, lowest first (a module's layer is that of its top-level folder or file):

    0 core      units, errors, files, naming, config, roles, device (is there a GPU: decided once),
                wait_classes (what a sampled thread waited on), wings (the entry points the wings
                register), the package's __init__ (lazy exports by name: it imports nothing)
    1 record    record/ (the one run record), trace/ (the one trace model)
    2 analysis  analysis/ (tables in, tables out)
    3 measure   runner, timing, guard, memory, noise, fingerprint, precision, interleave,
                interleave_workers (compare's one process per configuration), pipeline,
                sampling, examples/, batching/
    4 plots     plots/ (tables in, figures out)
    5 present   widgets/, audit/ (build on plots and the record)
    6 apps      cli/, __main__

The wings (``workbench_serve``, ``workbench_room``, ``workbench_redis``: packages beside ``workbench/``)
import the core and are never imported by it: no core module names one, at module level, inside a
function, or through ``importlib.import_module``; the core reaches them through entry points
(``workbench/wings.py``).

Importing a package means importing its ``__init__``; the implicit import of a module's
parent packages is not counted (every module would otherwise reach ``workbench/__init__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"

LAYERS = {
    0: (
        "units",
        "errors",
        "files",
        "naming",
        "config",
        "roles",
        "device",
        "wait_classes",
        "wings",
        "__init__",
    ),
    1: ("record", "trace"),
    2: ("analysis",),
    3: (
        "runner",
        "timing",
        "guard",
        "memory",
        "noise",
        "fingerprint",
        "precision",
        "interleave_workers",
        "interleave",
        "pipeline",
        "sampling",
        "examples",
        "batching",
    ),
    4: ("plots",),
    5: ("widgets", "audit"),
    6: ("cli", "__main__"),
}
LAYER_NAMES = {
    0: "core",
    1: "record",
    2: "analysis",
    3: "measure",
    4: "plots",
    5: "present",
    6: "apps",
}
LAYER_OF = {top: layer for layer, tops in LAYERS.items() for top in tops}

# Known violations, each owned by the helper fixing it (issue 24 and siblings). The lead empties this
# set at the end; until then the test stays green on these and fails on any NEW violation.
# Up-layer imports: (importer, imported) module names.
ALLOWED_UP: set[tuple[str, str]] = set()
# Cycles: a cycle is allowed while all its modules lie in one of these groups (the owners are mid-way:
# the members of a cycle change as they work).
ALLOWED_CYCLES: dict[str, frozenset[str]] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _base(mod: str, path: Path, level: int) -> str:
    """The package a relative import of ``level`` dots starts from."""
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return package


def imports(mod: str, path: Path, known: set[str]) -> list[tuple[str, bool]]:
    """``(imported workbench module, inside a function?)`` for every import statement in ``path``."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            if isinstance(child, ast.Import):
                found.extend(
                    (_nearest(a.name, known), inner)
                    for a in child.names
                    if a.name.split(".")[0] == "workbench"
                )
            elif isinstance(child, ast.ImportFrom):
                target = child.module or ""
                if child.level:
                    target = ".".join(filter(None, (_base(mod, path, child.level), target)))
                if target.split(".")[0] != "workbench":
                    continue
                for alias in child.names:
                    sub = f"{target}.{alias.name}"  # ``from . import stats``: the submodule itself
                    found.append((sub if sub in known else _nearest(target, known), inner))
            visit(child, inner)

    visit(ast.parse(path.read_text(), filename=str(path)), False)
    return [(target, inner) for target, inner in found if target and target != mod]


def _nearest(name: str, known: set[str]) -> str:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def layer(mod: str) -> int:
    parts = mod.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    if top not in LAYER_OF:
        raise AssertionError(
            f"workbench.{top} has no layer: add it to LAYERS in tests/test_layers.py and the README"
        )
    return LAYER_OF[top]


def graph() -> dict[str, list[tuple[str, bool]]]:
    mods = modules()
    known = set(mods)
    return {mod: imports(mod, path, known) for mod, path in mods.items()}


def up_imports(edges: dict[str, list[tuple[str, bool]]]) -> set[tuple[str, str]]:
    return {
        (mod, target)
        for mod, targets in edges.items()
        for target, _ in targets
        if layer(target) > layer(mod)
    }


def cycles(edges: dict[str, list[tuple[str, bool]]]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    succ = {mod: sorted({t for t, _ in targets}) for mod, targets in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(tuple(sorted(component)))
    return found


@pytest.fixture(scope="module")
def edges():
    return graph()


def test_every_module_has_a_layer(edges):
    for mod in edges:
        layer(mod)


def test_no_import_goes_up_a_layer(edges):
    new = sorted(up_imports(edges) - ALLOWED_UP)
    assert not new, "imports going up a layer (see the map in tests/test_layers.py):\n" + "\n".join(
        f"  {a} ({LAYER_NAMES[layer(a)]}) imports {b} ({LAYER_NAMES[layer(b)]})" for a, b in new
    )


def _allowed(cycle: tuple[str, ...]) -> bool:
    return any(set(cycle) <= group for group in ALLOWED_CYCLES.values())


def test_no_import_cycle(edges):
    new = sorted(c for c in cycles(edges) if not _allowed(c))
    assert not new, "import cycles (at module level or inside functions):\n" + "\n".join(
        "  " + " <-> ".join(c) for c in new
    )


def wing_imports(package: Path) -> list[tuple[str, str]]:
    """``(core module, wing module)`` for every import of a wing (a top-level ``workbench_*`` package)
    in the core at ``package``, at any depth, and every ``importlib.import_module("workbench_...")``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        mod = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif isinstance(node, ast.Call) and getattr(
                node.func, "attr", getattr(node.func, "id", "")
            ) in (
                "import_module",
                "__import__",
            ):
                names = [a.value for a in node.args[:1] if isinstance(a, ast.Constant)]
            else:
                continue
            found += [(mod, n) for n in names if isinstance(n, str) and n.startswith("workbench_")]
    return found


def test_no_core_module_imports_a_wing():
    found = wing_imports(PACKAGE)
    assert not found, (
        "the core imports a wing (reach it through workbench.wings.wing):\n"
        + "\n".join(f"  {a} imports {b}" for a, b in found)
    )


def test_a_planted_wing_import_is_found(tmp_path):
    core = tmp_path / "workbench"
    (core / "cli").mkdir(parents=True)
    (core / "__init__.py").write_text("")
    (core / "cli" / "x.py").write_text(
        "import json\nfrom workbench_room import app\n\n"
        "def late():\n    import workbench_serve.server\n\n"
        "def later():\n    import importlib\n    return importlib.import_module('workbench_redis')\n"
    )
    assert wing_imports(core) == [
        ("workbench.cli.x", "workbench_room"),
        ("workbench.cli.x", "workbench_serve.server"),
        ("workbench.cli.x", "workbench_redis"),
    ]


def test_allowed_violations_are_still_real(edges):
    """An entry fixed by its owner leaves the allowed sets, so the sets only ever shrink."""
    assert ALLOWED_UP <= up_imports(edges), sorted(ALLOWED_UP - up_imports(edges))
    fixed = [
        owner
        for owner, group in ALLOWED_CYCLES.items()
        if not any(set(c) <= group for c in cycles(edges))
    ]
    assert not fixed, f"no cycle left in these ALLOWED_CYCLES groups, remove them: {fixed}"


def test_the_package_imports_no_research_and_no_test_code():
    """``research/`` and ``tests/`` sit outside the package: nothing in it may need them."""
    found = []
    for mod, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [
                f"{mod} imports {n}" for n in names if n.split(".")[0] in ("research", "tests")
            ]
    assert not found, found


# The checker itself, on small made-up packages.


def _write(root: Path, files: dict[str, str]) -> dict[str, list[tuple[str, bool]]]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    global PACKAGE
    saved, PACKAGE = PACKAGE, root / "workbench"
    try:
        return graph()
    finally:
        PACKAGE = saved


def test_checker_sees_function_level_and_relative_imports(tmp_path):
    edges = _write(
        tmp_path,
        {
            "workbench/__init__.py": "",
            "workbench/units.py": "",
            "workbench/analysis/__init__.py": "",
            "workbench/analysis/stats.py": "from ..units import NS_PER_MS\n",
            "workbench/analysis/tail.py": "def f():\n    from ..plots.tail import g\n    from . import stats\n",
            "workbench/plots/__init__.py": "",
            "workbench/plots/tail.py": "import workbench.analysis.tail\n",
        },
    )
    assert edges["workbench.analysis.stats"] == [("workbench.units", False)]
    assert edges["workbench.analysis.tail"] == [
        ("workbench.plots.tail", True),
        ("workbench.analysis.stats", True),
    ]
    assert up_imports(edges) == {("workbench.analysis.tail", "workbench.plots.tail")}
    assert cycles(edges) == {("workbench.analysis.tail", "workbench.plots.tail")}


def test_checker_finds_a_three_module_cycle_and_not_a_chain(tmp_path):
    edges = _write(
        tmp_path,
        {
            "workbench/__init__.py": "",
            "workbench/analysis/__init__.py": "",
            "workbench/analysis/a.py": "from .b import x\n",
            "workbench/analysis/b.py": "def f():\n    from .c import y\n",
            "workbench/analysis/c.py": "from . import a\n",
            "workbench/analysis/d.py": "from .a import z\n",
        },
    )
    assert cycles(edges) == {
        ("workbench.analysis.a", "workbench.analysis.b", "workbench.analysis.c")
    }
    assert up_imports(edges) == set()
