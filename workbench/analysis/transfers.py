"""Host-device transfers: copies by direction and host memory kind, memsets, and syncing calls.

A copy's direction is the word after ``Memcpy`` in its name; its host memory kind the side of
``(Src -> Dst)`` in :data:`HOST_MEMORY_KINDS` (pageable copies, staged through a pinned buffer,
cannot overlap compute). Bandwidth: bytes / summed copy time, GB/s (1e9 bytes per second)."""

from __future__ import annotations

import re

import numpy as np

from ..trace import KIND_MEMCPY, KIND_MEMSET, KIND_RUNTIME, Trace, derived
from ..trace.columns import pd, rows_frame, totals_by_name
from ..trace.numbers import NA_INT

DIRECTIONS = ("HtoD", "DtoH", "DtoD")  # always reported, with zeros when absent
HOST_MEMORY_KINDS = ("Pageable", "Pinned", "Host", "Managed")
SYNC_CALL_NAMES = frozenset(
    """
    cudaStreamSynchronize cudaDeviceSynchronize cudaEventSynchronize cudaMemcpy cudaMemcpy2D
    cudaMemcpy3D cudaMemcpyToSymbol cudaMemcpyFromSymbol cudaMemset
    cuStreamSynchronize cuCtxSynchronize cuEventSynchronize cuMemcpy cuMemcpyHtoD cuMemcpyDtoH
    cuMemcpyDtoD
    hipStreamSynchronize hipDeviceSynchronize hipEventSynchronize hipMemcpy hipMemcpyWithStream
    hipMemcpy2D hipMemcpyToSymbol hipMemcpyFromSymbol hipMemset
""".split()
)
SYNC_COLUMNS = ("count", "total_ns", "max_ns")
_NAME = re.compile(
    r"^Memcpy\s+(?P<direction>\S+)(?:\s*\((?P<src>[^)]*?)\s*->\s*(?P<dst>[^)]*?)\))?"
)


def classify_copy(name: str) -> tuple[str, str | None]:
    """``(direction, host memory kind or None)`` of a memcpy event name."""
    match = _NAME.match(name)
    if match is None:
        return "other", None
    sides = (match["src"], match["dst"])
    host = next((s for s in sides if s in HOST_MEMORY_KINDS), None)
    return match["direction"], host


@derived
def copy_table(trace: Trace) -> dict[str, np.ndarray]:
    """The copies as numpy columns: dur_ns, bytes (NA_INT: absent), direction, host_memory, key."""
    rows = trace.rows_of([KIND_MEMCPY])
    classes = [classify_copy(n) for n in rows.name.labels]

    def pick(values) -> np.ndarray:
        table = np.empty(len(values) + 1, dtype=object)
        table[:-1] = values
        return table[rows.name.codes] if rows.name.codes.size else np.empty(0, dtype=object)

    return {
        "dur_ns": rows.dur_ns,
        "bytes": rows.bytes,
        "direction": pick([d for d, _ in classes]),
        "host_memory": pick([h for _, h in classes]),
        # the class of a copy: "HtoD Pageable", or the bare direction without a host side
        "key": pick([d if h is None else f"{d} {h}" for d, h in classes]),
    }


def split_copy_key(key: str) -> tuple[str, str | None]:
    """``(direction, host memory or None)`` of a copy's ``key`` (:func:`copy_table`)."""
    direction, _, host = key.partition(" ")
    return direction, host or None


def copy_rows(copies: dict, by: str) -> list[dict]:
    """Copies grouped by ``by`` ("direction" or "key"), sorted: ``{<by>, count, total_ns, bytes
    (None when none carries it), gb_per_s (NaN without bytes or time)}``."""
    out = []
    groups = copies[by]
    for value in sorted(set(groups.tolist())):
        mine = groups == value
        row = _totals(copies["dur_ns"][mine], copies["bytes"][mine])
        out.append({by: value, **row, "gb_per_s": _gb_per_s(row["bytes"], row["total_ns"])})
    return out


def _totals(dur_ns: np.ndarray, nbytes: np.ndarray) -> dict:
    """``{count, total_ns, bytes}`` (bytes None when no event carries it)."""
    present = nbytes != NA_INT
    return {
        "count": int(dur_ns.size),
        "total_ns": int(dur_ns.sum()),
        "bytes": int(nbytes[present].sum()) if present.any() else None,
    }


def _gb_per_s(nbytes: int | None, total_ns: int) -> float:
    return float(nbytes) / float(total_ns) if nbytes is not None and total_ns > 0 else np.nan


def copy_frame(rows: list[dict], by: str) -> pd.DataFrame:
    """:func:`copy_rows` dicts as a table (``bytes`` Int64)."""
    dtypes = {"count": "int64", "total_ns": "int64", "bytes": "Int64", "gb_per_s": float}
    return rows_frame(rows, {by: "str", **dtypes})


def direction_rows(trace: Trace) -> list[dict]:
    """Copies per direction as :func:`copy_rows` dicts; :data:`DIRECTIONS` always present."""
    rows = copy_rows(copy_table(trace), "direction")
    seen = {r["direction"] for r in rows}
    return rows + [
        {"direction": d, "count": 0, "total_ns": 0, "bytes": None, "gb_per_s": np.nan}
        for d in DIRECTIONS
        if d not in seen
    ]


def host_memory_rows(trace: Trace) -> list[dict]:
    """:func:`memcpy_by_host_memory` as dicts."""
    copies = copy_table(trace)
    with_host = np.array([h is not None for h in copies["host_memory"]], dtype=bool)
    return copy_rows({k: v[with_host] for k, v in copies.items()}, "key")


def memcpy_by_host_memory(trace: Trace) -> pd.DataFrame:
    """Copies with a host side, per ``"<direction> <host memory>"`` key (e.g.
    ``"HtoD Pageable"``): key, count, total_ns, bytes, gb_per_s."""
    return copy_frame(host_memory_rows(trace), "key")


def memcpy_summary(trace: Trace) -> dict:
    """``{count, total_ns, bytes}`` of all copies (bytes None when none carries it)."""
    copies = copy_table(trace)
    return _totals(copies["dur_ns"], copies["bytes"])


def memset_summary(trace: Trace) -> dict:
    """``{count, total_ns, bytes}`` of memset events."""
    rows = trace.rows_of([KIND_MEMSET])
    return _totals(rows.dur_ns, rows.bytes)


def sync_calls(trace: Trace) -> pd.DataFrame:
    """Runtime calls that block the host (``SYNC_CALL_NAMES``): name, count, total_ns, max_ns."""
    return rows_frame(sync_rows(trace), {"name": "str"} | dict.fromkeys(SYNC_COLUMNS, "int64"))


def sync_rows(trace: Trace) -> list[dict]:
    """:func:`sync_calls` as dicts (ties by name)."""
    runtime = trace.rows_of([KIND_RUNTIME])
    rows = np.flatnonzero(runtime.name.isin(SYNC_CALL_NAMES))
    return totals_by_name(runtime.name.take(rows), runtime.dur_ns[rows])


def copy_classes(trace: Trace) -> pd.DataFrame:
    """One row per copy class with copies, then ``memset``: label, count, total_ns, bytes,
    gb_per_s; a direction's copies naming no host side are what the host-memory keys leave."""
    keyed = [r | {"label": r["key"]} for r in host_memory_rows(trace)]
    rows = list(keyed)
    for d in direction_rows(trace):
        mine = [r for r in keyed if r["label"].startswith(f"{d['direction']} ")]
        rest = {k: d[k] - sum(r[k] for r in mine) for k in ("count", "total_ns")}
        if rest["count"] > 0:
            nbytes = d["bytes"]
            rest["bytes"] = None if nbytes is None else nbytes - sum(r["bytes"] or 0 for r in mine)
            rows.append({"label": d["direction"], **rest})
    memset = memset_summary(trace)
    if memset["count"]:
        rows.append({"label": "memset", **memset})
    rows = [r | {"gb_per_s": _gb_per_s(r["bytes"], r["total_ns"])} for r in rows]
    return copy_frame(rows, "label")
