"""Every notebook (the 8 teaching notebooks and the 2 dashboards) executes top to bottom, headless, on a CPU.

Each runs in a fresh kernel with nbclient, from its own folder (as Jupyter
and Voila run it), against the recorded data in ``data/``. When ``data/runs``
has not been recorded yet, a session fixture records the few runs the
notebooks read into a temporary data folder (``WORKBENCH_DATA``), with small
request counts. Notebooks must also be committed without outputs
(``scripts/strip_notebooks.py``).
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
DASHBOARDS = sorted((REPO / "notebooks" / "dashboards").glob("*.ipynb"))
TIMEOUT_S = 300  # per cell; each notebook takes well under a minute on two cores
# Run folders the notebooks read: (example, batch size, precision)
NEEDED_RUNS = [("tabular", 1, "fp32"), ("text", 1, "fp32"), ("image", 1, "fp32"), ("text", 8, "fp32"),
               ("text", 8, "bf16"), ("text", 8, "int8"), ("text", 2, "fp32"), ("text", 4, "fp32"),
               ("text", 16, "fp32")]


def run_folder(example: str, bs: int, precision: str) -> str:
    return f"{example}-cpu-bs{bs}-{precision}"


@pytest.fixture(scope="session")
def data_env(tmp_path_factory) -> dict[str, str]:
    """Environment of the notebook kernels: data/ when its runs are recorded, else a stand-in."""
    from workbench.examples import DATA_ENV, data_dir

    data = data_dir()
    missing = [n for n in (run_folder(*r) for r in NEEDED_RUNS) if not (data / "runs" / n / "run.json").is_file()]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    if not missing:
        return env
    from workbench import PipelineConfig, profile

    stand_in = tmp_path_factory.mktemp("data")
    for item in data.iterdir():
        if item.name != "runs":
            (stand_in / item.name).symlink_to(item)
    for example, bs, precision in NEEDED_RUNS:
        run = profile(example, PipelineConfig(batch_size=bs, precision=precision), requests=12, warmup=3, traced=1)
        temporary = run.trace_path.parent
        run.save(stand_in / "runs" / run_folder(example, bs, precision))
        shutil.rmtree(temporary, ignore_errors=True)
    env[DATA_ENV] = str(stand_in)
    return env


def execute(path: Path, env: dict[str, str]) -> float:
    """Run a notebook in a fresh kernel from its folder; return the wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
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
    return time.perf_counter() - started


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS + DASHBOARDS, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(path: Path, data_env):
    seconds = execute(path, data_env)
    print(f"\n{path.name}: {seconds:.1f} s")


def test_all_eight_teaching_notebooks_exist():
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(1, 9)]
    assert [p.name for p in DASHBOARDS] == ["latency_explorer.ipynb", "trace_explorer.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS + DASHBOARDS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path: Path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from strip_notebooks import strip
    finally:
        sys.path.pop(0)
    nb = nbformat.read(path, as_version=4)
    assert not strip(nb), f"{path.name} has outputs; run python scripts/strip_notebooks.py"
