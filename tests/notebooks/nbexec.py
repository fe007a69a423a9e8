"""What the notebook tests share: the notebooks, the runs they read, one execution per notebook per session.

Each notebook runs once, in a fresh kernel with nbclient, from its own folder (as
Jupyter and Voila run it), against the recorded data in ``data/``. When
``data/runs`` has not been recorded yet, the ``data_env`` fixture records the few
runs the notebooks read into a temporary data folder (``WORKBENCH_DATA``), with
small request counts. The executed notebook is kept for the tests that read its
outputs (claims, stderr, handouts). A dashboard runs with one more cell, the one
that draws its first view (Voila draws it as the page opens; a kernel alone does
not wait): the handout test reads that view, so each dashboard runs once too.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
DASHBOARDS = sorted((REPO / "notebooks" / "dashboards").glob("*.ipynb"))
SOLUTIONS = sorted((REPO / "notebooks" / "solutions").glob("[0-9][0-9]_*_solutions.ipynb"))
TIMEOUT_S = 300  # per cell; each notebook takes well under a minute on two quiet cores
# Run folders the notebooks read: (example, batch size, precision)
NEEDED_RUNS = [(ex, bs, "fp32") for ex in ("tabular", "text") for bs in (1, 2, 4, 8, 16)] + [
    ("image", 1, "fp32"), ("image", 8, "fp32"), ("text", 8, "bf16"), ("text", 8, "int8")]


# the cell that draws a dashboard's first view, appended when a dashboard is executed
FIRST_VIEW = {
    # and a second configuration: the previous one is drawn beside it
    "latency_explorer.ipynb": "explorer.wait()\nexplorer.set(batch_size=2).wait()",
    "trace_explorer.ipynb": "from workbench.examples import data_dir\n"
    "explorer.load_bytes('alexnet.json.gz', (data_dir() / 'traces' / "
    "'hta_critical_path_alexnet.json.gz').read_bytes())\nexplorer.wait()",
}


def run_folder(example: str, bs: int, precision: str) -> str:
    return f"{example}-cpu-bs{bs}-{precision}"


_EXECUTED: dict[Path, tuple] = {}


def execute(path: Path, env: dict[str, str]):
    """Run a notebook in a fresh kernel from its folder, a dashboard with its first view drawn (``FIRST_VIEW``);
    return (executed notebook, wall seconds)."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    if path in DASHBOARDS:
        nb.cells.append(nbformat.v4.new_code_cell(FIRST_VIEW.get(path.name, "explorer.wait()")))
    client = nbclient.NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    old = dict(os.environ)
    os.environ.update(env)  # the kernel inherits this process's environment
    started = time.perf_counter()
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    return nb, time.perf_counter() - started


def seconds(path: Path) -> float | None:
    entry = _EXECUTED.get(path)
    return entry[1] if entry and entry[0] is not None else None
