"""The slow requests' sampled time as two differential flame graphs: their work beside their waits.

Input: :func:`workbench.analysis.waits.stage_samples`. A sample classed ``cpu`` is work, any other
a wait; each tree merges stacks by path, ``stage -> frames`` (work) or ``stage -> class -> frames``
(waits), frames named as :func:`workbench.analysis.stacks.frame_name` names them.

Out (:mod:`workbench.plots.flame`'s input): ``{"tail_set", "requests": {"tail", "median"},
"work": [node], "waits": [node]}``, node ``{"id", "parent" (-1: root), "name", "kind" ("stage",
"class" or "frame"), "tail_ns", "median_ns"}``: inclusive sampled ns summed over each set's
requests. A node is kept with at least :data:`MIN_NODE_SHARE` of the tree's tail time; nodes are
depth-first, the most tail time first."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .stacks import frame_name
from .waits import stage_samples

MIN_NODE_SHARE = 0.01
TREES = ("work", "waits")


def wait_flames(
    sampled: dict[str, Any] | None,
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    order: list[str],
    pipeline_stages: list[str] | None = None,
) -> dict[str, Any] | None:
    """The two trees (module docstring); None without recorded rows or a measured request."""
    found = stage_samples(sampled, requests, stages, order, pipeline_stages)
    if found is None:
        return None
    rows, sets, tail = found
    names = [frame_name(file, function) for file, function, _ in sampled["frames"]]  # by frame id
    paths = [tuple(names[f] for f in stack) for stack in sampled["stacks"]]
    sums: dict[str, dict[tuple, list[int]]] = {tree: {} for tree in TREES}
    for k, ids in enumerate((sets[tail], sets["median"])):
        chosen = rows[rows["request"].isin(ids)]
        for stage, cls, stack, ns in zip(
            chosen["stage"], chosen["cls"], chosen["stack"], chosen["dt_ns"]
        ):
            frames = paths[int(stack)] if stack >= 0 else ()
            tree = "work" if cls == 0 else "waits"
            head = (("stage", stage),) if cls == 0 else (("stage", stage), ("class", cls))
            path = head + tuple(("frame", f) for f in frames)
            for depth in range(1, len(path) + 1):
                sums[tree].setdefault(path[:depth], [0, 0])[k] += int(ns)
    classes = sampled["classes"]
    return {
        "tail_set": tail,
        "requests": {"tail": len(sets[tail]), "median": len(sets["median"])},
        **{tree: _nodes(sums[tree], classes) for tree in TREES},
    }


def _nodes(sums: dict[tuple, list[int]], classes: list[str]) -> list[dict[str, Any]]:
    """Depth-first nodes of ``sums`` (path -> [tail ns, median ns]) with enough tail time."""
    total = sum(v[0] for p, v in sums.items() if len(p) == 1)
    keep = {p for p, v in sums.items() if total and v[0] >= MIN_NODE_SHARE * total}
    children: dict[tuple, list[tuple]] = {}
    for p in keep:
        children.setdefault(p[:-1], []).append(p)
    out: list[dict[str, Any]] = []

    def visit(path: tuple, parent: int) -> None:
        kind, name = path[-1]
        node_id = len(out)
        tail_ns, median_ns = sums[path]
        name = classes[int(name)] if kind == "class" else name
        out.append(
            {
                "id": node_id,
                "parent": parent,
                "name": name,
                "kind": kind,
                "tail_ns": tail_ns,
                "median_ns": median_ns,
            }
        )
        for child in sorted(children.get(path, []), key=lambda c: (-sums[c][0], c)):
            visit(child, node_id)

    for root in sorted(children.get((), []), key=lambda c: (-sums[c][0], c)):
        visit(root, -1)
    return out
