"""``workbench.export.dashboard.recorded_entries``: which recorded runs the static dashboard offers."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workbench.export.dashboard import recorded_entries

RUNS = Path(__file__).resolve().parents[2] / "data" / "runs"
TWINS = ("text-cuda-bs1024-fp32", "text-cuda-bs1024-fp32-sync-request", "text-cuda-bs1-fp32-graph")


@pytest.fixture
def runs(tmp_path):
    for name in TWINS:
        shutil.copytree(RUNS / name, tmp_path / name)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.json").write_text("{")
    return tmp_path


def test_a_sync_request_twin_is_its_own_variant_not_a_duplicate(runs):
    entries, notes = recorded_entries(runs)
    assert [(e.path.name, e.batch_size, e.variant) for e in entries] == [
        ("text-cuda-bs1-fp32-graph", 1, "cuda_graph=True"),
        ("text-cuda-bs1024-fp32", 1024, "default"),
        ("text-cuda-bs1024-fp32-sync-request", 1024, "sync=request"),
    ]
    assert len(notes) == 1 and notes[0].startswith("skipped broken: ")
