"""A built wheel carries the example data: installed into a fresh venv it runs ``--example tabular`` outside the repo.

The venv reuses this environment's dependencies through a ``.pth`` line (the
``--system-site-packages`` of a venv made from a venv would see only the base
interpreter's packages); this environment's editable install of ``workbench``
is not activated there, so the wheel's copy is the one that runs.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import sqlite3
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_package_data_is_the_repository_data():
    from workbench.examples import package_data_dir

    pkg, repo = package_data_dir(), REPO / "data"
    assert (pkg / "vocab.txt").read_bytes() == (repo / "vocab.txt").read_bytes(), "run make data"
    dump = lambda p: list(sqlite3.connect(p).iterdump())  # noqa: E731
    assert dump(pkg / "features.sqlite") == dump(repo / "features.sqlite"), "run make data"


def test_examples_read_the_package_copy(monkeypatch):
    from workbench.examples import DATA_ENV, data_file, package_data_dir

    monkeypatch.delenv(DATA_ENV, raising=False)
    assert data_file("vocab.txt") == package_data_dir() / "vocab.txt"


@pytest.mark.slow
def test_wheel_runs_the_tabular_example_from_outside_the_repo(tmp_path):
    src, wheels = (
        tmp_path / "src",
        tmp_path / "wheels",
    )  # a copy: an in-tree build would leave build/ in the repo
    shutil.copytree(
        REPO / "workbench", src / "workbench", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(src),
        ],
        check=True,
        cwd=tmp_path,
        timeout=300,
    )
    wheel = next(wheels.glob("workbench-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False, system_site_packages=False)
    python = env_dir / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (purelib / "deps-of-the-test-env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_DATA")} | {
        "OMP_NUM_THREADS": "1"
    }
    where = subprocess.run(
        [python, "-c", "import workbench; print(workbench.__file__)"],
        cwd=tmp_path,
        env=clean,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(purelib)
    out = subprocess.run(
        [
            python,
            "-m",
            "workbench",
            "profile",
            "--closed-loop",
            "--example",
            "tabular",
            "--requests",
            "5",
            "--warmup",
            "1",
            "--traced",
            "0",
            "--json",
            "--out",
            str(tmp_path / "run"),
        ],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["pipeline"] == "tabular" and report["end_to_end"]["count"] == 5
