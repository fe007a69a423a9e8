"""Which libraries a stage's time is spent in, from the Python frames and operators of a traced run.

Per stage, the time inside the outermost frame of each known library (a PIL call calling more PIL
counts once) as a share of the stage's time; a torch operator outside every library frame counts as
``torch``. The audit reads it as evidence of a stage's role (:mod:`workbench.roles`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

# library -> substrings of a frame name (``PIL/Image.py(123): resize``, ``<built-in method execute of
# sqlite3.Cursor object ...>``); matched case-sensitively, first match in this order (orjson before json).
LIBRARIES = {
    "PIL": ("PIL/",),
    "cv2": ("cv2",),
    "sqlite3": ("sqlite3",),
    "redis": ("redis/",),
    "socket": (
        "socket.py",
        "ssl.py",
        "http/client.py",
        "urllib3/",
        "httpx/",
        "requests/",
        "aiohttp/",
    ),
    "tokenizers": ("tokenizers",),
    "orjson": ("orjson",),
    "msgspec": ("msgspec",),
    "json": ("json/",),
    "torchvision": ("torchvision/",),
    "torch": ("torch/",),
}
OPERATOR_KIND = "cpu_op"  # a torch operator node of the flame tree


def library_of(name: str) -> str | None:
    """The library a frame name belongs to, or None."""
    for lib, needles in LIBRARIES.items():
        if any(n in name for n in needles):
            return lib
    return None


def library_shares(tree: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Stage -> {library: share of the stage's total time in its outermost frames}, from a flame
    tree (parents before children); stages without a known library's frames are left out."""
    ids = tree["id"].to_numpy()
    parent = tree["parent"].to_numpy()
    kinds = tree["kind"].astype(str).to_numpy()
    names = tree["name"].astype(str).to_numpy()
    total = tree["total_ns"].to_numpy(np.int64)
    pos = {int(i): k for k, i in enumerate(ids)}
    stage_of = np.full(len(ids), -1)
    inside = np.zeros(len(ids), dtype=bool)  # already inside some library's frame
    sums: dict[tuple[str, str], int] = {}
    stage_total: dict[str, int] = {}
    for k in range(len(ids)):
        p = pos.get(int(parent[k]), -1)
        if kinds[k] == "stage":
            stage_of[k], inside[k] = k, False
            stage_total[names[k]] = stage_total.get(names[k], 0) + int(total[k])
            continue
        stage_of[k] = stage_of[p] if p >= 0 else -1
        inside[k] = inside[p] if p >= 0 else False
        if stage_of[k] < 0 or inside[k] or kinds[k] not in ("python", OPERATOR_KIND):
            continue
        lib = "torch" if kinds[k] == OPERATOR_KIND else library_of(names[k])
        if lib is not None:
            key = (names[stage_of[k]], lib)
            sums[key] = sums.get(key, 0) + int(total[k])
            inside[k] = True
    out: dict[str, dict[str, float]] = {}
    for (stage, lib), ns in sums.items():
        if stage_total.get(stage):
            out.setdefault(stage, {})[lib] = ns / stage_total[stage]
    return out
