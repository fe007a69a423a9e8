"""Every notebook (teaching notebooks, their solutions, the dashboards) executes top to bottom, headless, on a CPU.

Notebooks must also be committed without outputs (``scripts/strip_notebooks.py``),
each teaching notebook ends with one to three exercises whose solutions live in
``notebooks/solutions/``, and what a student sees on stderr is only the profiler
library's chatter that notebook 3 and 5 explain.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from nbexec import DASHBOARDS, NOTEBOOKS, REPO, SOLUTIONS, seconds

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

# kineto (the C++ library under torch.profiler) writes these straight to stderr; see notebook 3 and 5
KINETO_STDERR = (
    re.compile(r"^USDT:.* SyncActivityProfilerHandler\.cpp:\d+\] profiler_(start|stop)$"),
    re.compile(
        r"^ERROR: External init callback must run in same thread as registerClient \(-?\d+ != -?\d+\)$"
    ),
)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS + SOLUTIONS + DASHBOARDS, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(path: Path, executed):
    executed(path)
    print(f"\n{path.name}: {seconds(path):.1f} s")


def test_all_fourteen_teaching_notebooks_exist():
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(1, 15)]
    assert {"latency_explorer.ipynb", "trace_explorer.ipynb", "generative_explorer.ipynb"} <= {
        p.name for p in DASHBOARDS
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_ends_with_exercises_and_its_solutions_exist(path: Path):
    nb = nbformat.read(path, as_version=4)
    last = nb.cells[-1]
    assert last.cell_type == "markdown" and "## Exercises" in last.source, (
        f"{path.name}: last cell is not the exercises"
    )
    numbered = re.findall(r"^(\d)\. ", last.source, flags=re.M)
    assert 1 <= len(numbered) <= 3 and numbered == [str(i) for i in range(1, len(numbered) + 1)]
    solution = REPO / "notebooks" / "solutions" / f"{path.stem}_solutions.ipynb"
    assert f"solutions/{solution.name}" in last.source and solution.is_file()
    solved = nbformat.read(solution, as_version=4)
    for i in range(1, len(numbered) + 1):
        assert any(
            c.cell_type == "markdown" and f"**Exercise {i}.**" in c.source for c in solved.cells
        ), f"{solution.name} has no solution for exercise {i}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_file_an_exercise_names_is_loaded_by_its_notebook(path: Path):
    """A results file has its own keys: the notebook reads it before an exercise asks a question of it. A trace
    (``data/traces``) is read like every other trace, so the notebook loads one of those with ``load_trace``."""
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    named = [
        w
        for span in re.findall(r"`([^`]+)`", nb.cells[-1].source)
        for w in span.split()
        if ".json" in w
    ]
    for name in named:
        if name.startswith("data/traces/"):
            assert (REPO / name).is_file(), (
                f"{path.name}: its exercises name {name}, which is not in the repository"
            )
            assert 'load_trace(data_dir() / "traces" /' in code, (
                f"{path.name} loads no trace of data/traces"
            )
        else:
            assert f'"{Path(name).name}"' in code, (
                f"{path.name}: its exercises name {name}, which it never loads"
            )


@pytest.mark.parametrize("path", NOTEBOOKS + SOLUTIONS + DASHBOARDS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path: Path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from strip_notebooks import strip
    finally:
        sys.path.pop(0)
    nb = nbformat.read(path, as_version=4)
    assert not strip(nb), f"{path.name} has outputs; run python scripts/strip_notebooks.py"


def test_live_profiling_in_notebooks_uses_one_thread():
    """Every PipelineConfig in a teaching notebook that profiles live sets threads=1 (notebook 1 says why)."""
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        for call in re.findall(
            r"(?:profile|run_load)\(\s*[\w\"']+,\s*(PipelineConfig\([^)]*\))", code
        ):
            assert "threads=1" in call, f"{path.name}: {call} profiles without threads=1"
        if re.search(
            r"from workbench import [^\n]*\bprofile\b", code
        ):  # the workbench's, not torch.profiler's
            assert "threads=1" in code, f"{path.name} profiles without threads=1"


def stderr_lines(nb) -> list[str]:
    return [
        line
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream" and out.get("name") == "stderr"
        for line in out["text"].splitlines()
        if line.strip()
    ]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS + SOLUTIONS, ids=lambda p: p.name)
def test_stderr_holds_only_the_explained_profiler_lines(path: Path, executed):
    unexplained = [
        line
        for line in stderr_lines(executed(path))
        if not any(p.match(line) for p in KINETO_STDERR)
    ]
    assert not unexplained, f"{path.name} writes to stderr: {unexplained[:5]}"


def test_the_profiler_lines_are_explained_where_they_first_appear():
    text = {
        p.name[:2]: "\n".join(
            c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "markdown"
        )
        for p in NOTEBOOKS
    }
    assert (
        "USDT:" in text["03"] and "KINETO_LOG_LEVEL=6" in text["03"]
    )  # first traced run: notebook 3
    assert (
        "USDT:" in text["07"]
    )  # plain torch.profiler, where the workbench does not silence kineto
    assert (
        "External init callback must run in same thread as registerClient" in text["05"]
    )  # the explorer primes it


def test_every_shipped_trace_the_notebooks_read_has_its_source_and_licence_row():
    readme = (REPO / "data" / "README.md").read_text()
    for trace in sorted((REPO / "data" / "traces").glob("*.json.gz")):
        assert re.search(
            rf"^\| `{re.escape(trace.name)}` \| `tests/data/[^`]+` \| .+ \|$", readme, flags=re.M
        ), f"data/README.md has no source row for {trace.name}"
