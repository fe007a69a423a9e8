"""Fixtures of the notebook tests (the shared helpers live in nbexec.py)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from nbexec import _EXECUTED, NEEDED_RUNS, REPO, execute, run_folder


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
        run = profile(example, PipelineConfig(batch_size=bs, precision=precision, threads=1), requests=12, warmup=3,
                      traced=1)
        run.save(stand_in / "runs" / run_folder(example, bs, precision))
        run.close()
    for name in (p.name for p in (data / "runs").glob("*-cuda-*")):  # recorded GPU runs cannot be re-made here
        (stand_in / "runs" / name).symlink_to(data / "runs" / name)
    env[DATA_ENV] = str(stand_in)
    return env


@pytest.fixture(scope="session")
def executed(data_env):
    """``executed(path)``: the notebook run once this session (an error in a cell raises once, then skips)."""
    def get(path: Path):
        if path not in _EXECUTED:
            try:
                _EXECUTED[path] = execute(path, data_env)
            except Exception as exc:  # noqa: BLE001 - reported by the test that ran it first
                _EXECUTED[path] = (None, exc)
                raise
        nb, seconds = _EXECUTED[path]
        if nb is None:
            pytest.skip(f"{path.name} failed to execute: see test_notebook_runs_top_to_bottom[{path.name}]")
        return nb
    return get
