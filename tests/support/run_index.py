"""The recorded-run index by configuration key, kept for its tests.

The latency explorer finds recorded runs by fingerprint (``workbench.widgets.latency_support``);
this older index by ``(pipeline, device family, batch size, precision)`` is used by
nothing in the package any more, only by the tests of reading a folder of runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import RunRecordError
from workbench.record import META_FILE, RunMeta, read_meta

Key = tuple[str, str, int, str]  # (pipeline, device, batch_size, precision)


def run_key(meta: RunMeta, pipeline: str | None = None) -> Key:
    """The cache key of a run: pipeline, device family (cpu/cuda), batch size, precision."""
    cfg = meta.config
    device = (cfg.device or "cpu").split(":")[0]
    return (pipeline or str(meta.pipeline), device, cfg.batch_size or 1, cfg.precision or "fp32")


class RunIndex(dict):
    """Recorded run folders by key, plus ``skipped``: one note per run folder that could not be read."""

    def __init__(self):
        super().__init__()
        self.skipped: list[str] = []

    @property
    def note(self) -> str:
        """A line for the status bar ("" when nothing was skipped)."""
        if not self.skipped:
            return ""
        return f"skipped {len(self.skipped)} unreadable recorded run(s): " + "; ".join(self.skipped)


def index_runs(paths: Any) -> RunIndex:
    """Recorded run folders by key, from folders of run folders or run folders themselves.

    Reads only each ``run.json`` (through ``workbench.record``). Folders
    without one are not runs and are passed over (a data folder may hold other
    things); a run whose ``run.json`` is broken is skipped with a note in
    ``.skipped``, never an error that stops the explorer. Runs made with user
    ``options`` (variants such as ``-pageable``) are left out: the key has no
    room for them. Later paths win on equal keys.
    """
    found = RunIndex()
    if paths is None:
        return found
    if isinstance(paths, (str, Path)):
        paths = [paths]
    for root in map(Path, paths):
        candidates = (
            [root]
            if (root / META_FILE).is_file()
            else sorted(p for p in root.glob("*") if p.is_dir())
        )
        for folder in candidates:
            if not (folder / META_FILE).is_file():
                continue
            try:
                meta = read_meta(folder / META_FILE)
            except RunRecordError as exc:
                found.skipped.append(str(exc))
                continue
            if meta.kind == "profile" and not meta.config.options:
                found[run_key(meta)] = folder
    return found
