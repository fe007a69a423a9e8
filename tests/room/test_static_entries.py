"""``workbench_room.static.recorded_entries``: which recorded runs the static dashboard offers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workbench_room.static import recorded_entries

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


def test_each_entry_names_the_card_torch_and_date_of_its_own_record(runs):
    from workbench.record import META_FILE, read_meta

    entries, _ = recorded_entries(runs)
    for e in entries:
        meta = read_meta(RUNS / e.path.name / META_FILE)
        assert (e.recorded_on, e.torch, e.date) == (
            meta.env.device_name,
            meta.env.torch,
            meta.created[:10],
        )
    assert {e.recorded_on for e in entries} == {
        "NVIDIA H100 80GB HBM3"
    }  # the text runs: never "H200"


def test_the_page_carries_each_entry_s_card_into_its_status_line(runs):
    import json
    import re

    from workbench_room.static import build_page

    entries, notes = recorded_entries(runs)
    page = build_page(entries, {}, {}, notes)
    data = json.loads(
        re.search(r'<script type="application/json" id="wb-data">(.*?)</script>', page, re.S).group(
            1
        )
    )
    assert [(d["folder"], d["recorded_on"], d["date"]) for d in data["entries"]] == [
        (e.path.name, "NVIDIA H100 80GB HBM3", "2026-11-26") for e in entries
    ]
    assert "'), recorded on ' + e.recorded_on + ', torch ' + e.torch" in page
