"""The two locks: requirements.lock (the runtime, `make dashboard`) inside requirements-dev.lock (`make test`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

# test, browser and benchmark tools, and the wings only the tests exercise: never in the runtime lock
DEV_ONLY = {
    "pytest",
    "hypothesis",
    "playwright",
    "ruff",
    "holistictraceanalysis",
    "torch-tb-profiler",
    "tensorboard",
    "pyinstrument",
    "simpy",
    "orjson",
    "locust",
    "opentelemetry-sdk",
    "redis",
}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines: list[str], source: Path) -> dict[str, str]:
    """``{name: version}`` of ``name==version`` lines; ``-r FILE`` includes FILE's pins (relative to ``source``)."""
    found: dict[str, str] = {}
    for line in (raw.split("#", 1)[0].strip() for raw in lines):
        if line.startswith("-r "):
            found.update(lock_pins(source.parent / line[3:].strip()))
        elif line:
            name, sep, version = line.partition("==")
            assert sep and re.fullmatch(r"[\w.]+", version), (
                f"{source.name}: not an exact pin: {line}"
            )
            found[normalized(name)] = version
    return found


def lock_pins(path: Path) -> dict[str, str]:
    return pins(path.read_text().splitlines(), path)


def requested(path: Path) -> set[str]:
    """Names asked for in a requirements .in file, those of the files it includes too."""
    names = set()
    for line in (raw.split("#", 1)[0].strip() for raw in path.read_text().splitlines()):
        if line.startswith("-r "):
            names |= requested(path.parent / line[3:].strip())
        elif line:
            names.add(normalized(re.split(r"[=<>!~;\[ ]", line, maxsplit=1)[0]))
    return names


RUNTIME = lock_pins(REPO / "requirements.lock")
DEV = lock_pins(REPO / "requirements-dev.lock")


def test_every_runtime_pin_is_in_the_dev_lock_at_the_same_version():
    assert {name: DEV.get(name) for name in RUNTIME} == RUNTIME
    assert RUNTIME["torch"] == DEV["torch"] == "2.13.0"  # the local CPU wheel


def test_no_test_or_benchmark_tool_in_the_runtime_lock():
    assert DEV_ONLY <= set(DEV)
    assert DEV_ONLY & set(RUNTIME) == set()


def test_each_lock_pins_what_its_in_file_asks_for():
    assert requested(REPO / "requirements.in") - set(RUNTIME) == set()
    assert requested(REPO / "requirements-dev.in") - set(DEV) == set()


def test_environment_yml_names_the_runtime_pins():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    (pip,) = [dep["pip"] for dep in env["dependencies"] if isinstance(dep, dict)]
    assert pins(pip, REPO / "environment.yml") == RUNTIME


def make_dry_run(tmp_path: Path, target: str) -> list[str]:
    """The pip installs ``make -n TARGET`` would run, in a copy of the Makefile and its inputs."""
    proc = subprocess.run(
        ["make", "-n", target], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return [
        line.split(" -m pip install ")[1]
        for line in proc.stdout.splitlines()
        if "pip install" in line
    ]


@pytest.fixture
def make_tree(tmp_path: Path) -> Path:
    for name in ("Makefile", "requirements.lock", "requirements-dev.lock", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
        os.utime(tmp_path / name, (1_000, 1_000))
    (tmp_path / ".venv").mkdir()
    return tmp_path


def stamp(tree: Path, name: str, mtime: int) -> None:
    (tree / ".venv" / name).touch()
    os.utime(tree / ".venv" / name, (mtime, mtime))


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_dashboard_installs_the_runtime_lock_only(make_tree):
    flags = "-q --disable-pip-version-check"
    assert make_dry_run(make_tree, "dashboard") == [
        f"{flags} -r requirements.lock",
        f"{flags} --no-deps --no-build-isolation -e .",
    ]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_after_make_dashboard_adds_the_dev_lock(make_tree):
    stamp(make_tree, ".installed-stamp", 2_000)
    assert make_dry_run(make_tree, "test") == [
        "-q --disable-pip-version-check -r requirements-dev.lock"
    ]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_dashboard_after_make_test_installs_nothing(make_tree):
    stamp(make_tree, ".installed-stamp", 2_000)
    stamp(make_tree, ".installed-dev-stamp", 3_000)
    assert make_dry_run(make_tree, "dashboard") == []
    assert make_dry_run(make_tree, "test") == []
