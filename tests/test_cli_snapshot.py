"""scripts/cli_snapshot.py: the capture that shows a refactor changed no command line output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import load_script

REPO = Path(__file__).resolve().parents[1]
cli_snapshot = load_script(REPO / "scripts" / "cli_snapshot.py", "cli_snapshot_script")


def capture(folder: Path) -> int:
    """``cli_snapshot.capture(folder)`` from the repository (the commands read relative paths, as the
    script's own chdir gives): the files written."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        return cli_snapshot.capture(folder)


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> tuple[Path, int]:
    """One capture, shared: the first test reads it, the second captures again beside it."""
    folder = tmp_path_factory.mktemp("capture")
    return folder, capture(folder)


def test_captures_every_help_each_trace_and_each_run_twice(captured):
    tmp_path, written = captured
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == written
    helps = [f for f in files if f.startswith("help")]
    assert "help" in helps and "help_analyze" in helps and "help_simulate" in helps
    assert len(helps) == 13  # the top level and its 12 commands
    for name in helps:
        assert (
            (tmp_path / name)
            .read_text()
            .startswith("exit 0\n--- stdout\nusage: python -m workbench")
        )
    shown = (tmp_path / "show_text-cpu-bs1-fp32.json").read_text()
    assert shown.startswith("exit 0\n")
    body = shown.split("--- stdout\n", 1)[1].rsplit("\n--- stderr\n", 1)[0]
    assert json.loads(body)["config"]["batch_size"] == 1
    analyzed = (tmp_path / "analyze_data_hta_critical_path_simple_add.json.gz.txt").read_text()
    assert analyzed.startswith("exit 0\n")


@pytest.mark.slow
def test_the_same_code_captures_byte_identical_files(captured, tmp_path):
    first, second = captured[0], tmp_path / "b"
    capture(second)

    assert sorted(p.name for p in second.iterdir()) == sorted(p.name for p in first.iterdir())
    for path in first.iterdir():
        assert (second / path.name).read_bytes() == path.read_bytes(), path.name
