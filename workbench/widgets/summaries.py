"""What the latency explorer keeps of a run: a small summary, not the run.

A :class:`RunView` holds the stage summary, the per-request durations the
distribution needs (three int64 columns per table) and the already-built flame
figure (pruned by ``workbench.plots``), so caching many of them costs little
memory; the trace file itself is read once and never kept. Recorded runs are
indexed by their configuration from ``run.json`` alone and loaded on demand.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis.budget import stage_summary
from ..record import META_FILE, Run

Key = tuple[str, str, int, str]  # (pipeline, device, batch_size, precision)
REQUEST_KEEP = ["request", "warmup", "ok", "dur_ns"]
STAGE_KEEP = ["request", "stage", "dur_ns"]
TRACE_TMP_PREFIX = "workbench-trace-"


@dataclass(frozen=True, eq=False)
class RunView:
    """A cached, display-ready summary of one run (hashed by identity: a re-measured run is a new view).

    summary: ``stage_summary`` table (ms). requests/stages: the few columns the
    distribution figure reads. flame: the flame figure of the traced run (or
    None when the run has no trace). source: where it came from, for the status line.
    """

    key: Key
    label: str
    source: str
    stage_order: list[str]
    summary: pd.DataFrame
    requests: pd.DataFrame
    stages: pd.DataFrame
    flame: Any
    failed: int

    @property
    def p99_ms(self) -> float | None:
        row = self.summary[self.summary["name"] == "end_to_end"]
        return None if row.empty else row["p99_ms"].iloc[0]


def run_key(meta: dict[str, Any], pipeline: str | None = None) -> Key:
    """The cache key of a run: pipeline, device family (cpu/cuda), batch size, precision."""
    cfg = meta.get("config") or {}
    device = str(cfg.get("device", "cpu")).split(":")[0]
    return (pipeline or str(meta.get("pipeline")), device, int(cfg.get("batch_size", 1)), str(cfg.get("precision", "fp32")))


def summarize(run: Run, key: Key, source: str, flame_builder=None) -> RunView:
    """A RunView of ``run``; ``flame_builder(trace_path)`` makes the flame figure when there is a trace."""
    order = run.stage_names
    summary = stage_summary(run.requests, run.stages, order)
    requests = run.requests[REQUEST_KEEP].copy()
    stages = run.stages[STAGE_KEEP].copy()
    measured = requests[~requests["warmup"]]
    flame = None
    if run.trace_path is not None and flame_builder is not None:
        flame = flame_builder(run.trace_path)
    return RunView(key=key, label=run.label, source=source, stage_order=order, summary=summary,
                   requests=requests, stages=stages, flame=flame, failed=int((~measured["ok"]).sum()))


def discard_trace(run: Run) -> None:
    """Delete the temporary trace folder the runner made for ``run`` (never a saved run's file)."""
    path = run.trace_path
    if path is None or run.path is not None:
        return
    folder = Path(path).parent
    if folder.name.startswith(TRACE_TMP_PREFIX) and folder.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(folder, ignore_errors=True)
    run.trace_path = None


def index_runs(paths: Any) -> dict[Key, Path]:
    """Recorded run folders by key, from folders of run folders or run folders themselves.

    Reads only each ``run.json``; unreadable or non-run folders are skipped
    (a data folder may hold other things), and so are runs made with user
    ``options`` (variants such as ``-pageable``: the key has no room for them).
    Later paths win on equal keys.
    """
    if paths is None:
        return {}
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: dict[Key, Path] = {}
    for root in map(Path, paths):
        candidates = [root] if (root / META_FILE).is_file() else sorted(p for p in root.glob("*") if p.is_dir())
        for folder in candidates:
            meta = _read_meta(folder)
            if meta is not None and meta.get("kind", "profile") == "profile" and not (meta.get("config") or {}).get("options"):
                found[run_key(meta)] = folder
    return found


def _read_meta(folder: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == "workbench.run" else None
