"""The trace explorer's upload button tells the page's size limit (the room launcher's, else Voila's 10 MiB)."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from workbench.widgets.traces import TraceExplorer, upload_hint  # noqa: E402


def test_upload_hint_names_the_limit_and_the_way_out():
    assert upload_hint({}) == (
        "uploads up to 10 MiB (.json or .json.gz); "
        "for a larger trace run: python -m workbench analyze FILE"
    )
    assert upload_hint({"WORKBENCH_UPLOAD_LIMIT_BYTES": str(64 << 20)}).startswith(
        "uploads up to 64 MiB "
    )
    assert upload_hint({"WORKBENCH_UPLOAD_LIMIT_BYTES": "lots"}).startswith("uploads up to 10 MiB ")


def test_the_upload_button_carries_the_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_UPLOAD_LIMIT_BYTES", str(3 << 20))
    explorer = TraceExplorer(tmp_path, start=False)
    try:
        assert explorer.upload.tooltip.startswith("uploads up to 3 MiB ")
    finally:
        explorer.close()
