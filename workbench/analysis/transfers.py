"""Host-device transfers: copies by direction and host memory kind, memsets, and
the runtime calls that make the host wait for the GPU.

A copy's direction is the word after ``Memcpy`` in its name (``HtoD``, ``DtoH``,
``DtoD``, ``HtoH``, ``PtoP``...). Its host memory kind is whichever side of the
parenthesised ``(Src -> Dst)`` is ``Pageable``, ``Pinned``, ``Host`` (AMD traces)
or ``Managed``; device-to-device copies have none. Pageable copies cannot overlap
compute and are staged through a pinned buffer: the usual cause of slow HtoD.
Achieved bandwidth is bytes / summed copy time, in GB/s (1e9 bytes per second).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace import KIND_MEMSET, Trace, derived

DIRECTIONS = ("HtoD", "DtoH", "DtoD")  # always reported, with zeros when absent
HOST_MEMORY_KINDS = ("Pageable", "Pinned", "Host", "Managed")
SYNC_CALL_NAMES = frozenset({
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
    "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol", "cudaMemset",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpy", "cuMemcpyHtoD",
    "cuMemcpyDtoH", "cuMemcpyDtoD",
    "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipMemcpy",
    "hipMemcpyWithStream", "hipMemcpy2D", "hipMemcpyToSymbol", "hipMemcpyFromSymbol", "hipMemset"})
_NAME = re.compile(r"^Memcpy\s+(?P<direction>\S+)(?:\s*\((?P<src>[^)]*?)\s*->\s*(?P<dst>[^)]*?)\))?")


def classify_copy(name: str) -> tuple[str, str | None]:
    """``(direction, host memory kind or None)`` of a memcpy event name."""
    match = _NAME.match(name)
    if match is None:
        return "other", None
    sides = (match["src"], match["dst"])
    host = next((s for s in sides if s in HOST_MEMORY_KINDS), None)
    return match["direction"], host


@derived
def memcpy_events(trace: Trace) -> pd.DataFrame:
    """Copy rows with their class. Columns: name, ts_ns, dur_ns, device, stream,
    correlation, bytes, direction (str), host_memory (str or None), key (e.g.
    ``"HtoD Pageable"``, or just the direction when no side is host memory); each
    distinct name is classified once."""
    out = trace.memcpy[["name", "ts_ns", "dur_ns", "device", "stream", "correlation", "bytes"]].reset_index(drop=True)
    names = out["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        names = names.cat.remove_unused_categories()
        distinct, codes = list(names.cat.categories), names.cat.codes.to_numpy()
    else:
        distinct, codes = pd.factorize(names.astype(str))[::-1]
        distinct = list(distinct)
    classes = [classify_copy(n) for n in distinct]
    pick = (lambda values: np.array(values, dtype=object)[codes] if codes.size else np.empty(0, dtype=object))
    return out.assign(name=pick(distinct), direction=pd.Series(pick([d for d, _ in classes]), dtype="str"),
                      host_memory=pd.Series(pick([h for _, h in classes]), dtype=object),
                      key=pd.Series(pick([copy_key(d, h) for d, h in classes]), dtype="str"))


def copy_key(direction: str, host_memory: str | None) -> str:
    """The class of a copy: ``"HtoD Pageable"``, or the bare direction without a host side."""
    return direction if host_memory is None else f"{direction} {host_memory}"


def split_copy_key(key: str) -> tuple[str, str | None]:
    """``(direction, host memory or None)`` of a :func:`copy_key`."""
    direction, _, host = key.partition(" ")
    return direction, host or None


def _aggregate(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    grouped = frame.groupby(by, sort=True).agg(count=("dur_ns", "size"), total_ns=("dur_ns", "sum"),
                                               bytes=("bytes", "sum"), with_bytes=("bytes", "count"))
    grouped["bytes"] = grouped["bytes"].astype("Int64").where(grouped["with_bytes"] > 0)
    grouped["gb_per_s"] = _bandwidth(grouped["bytes"], grouped["total_ns"])
    return grouped.drop(columns="with_bytes").reset_index()


def _bandwidth(nbytes: pd.Series, total_ns: pd.Series) -> pd.Series:
    """bytes / ns = GB/s (1e9 B/s); NaN without bytes or time."""
    b = nbytes.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    t = total_ns.to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return pd.Series(np.where(t > 0, b / t, np.nan), index=nbytes.index)


def memcpy_by_direction(trace: Trace) -> pd.DataFrame:
    """Copies per direction. Columns: direction, count, total_ns, bytes (Int64, NA when
    no copy carries bytes), gb_per_s. HtoD, DtoH and DtoD are always present."""
    agg = _aggregate(memcpy_events(trace), "direction")
    missing = [d for d in DIRECTIONS if d not in set(agg["direction"])]
    filler = pd.DataFrame({"direction": missing, "count": 0, "total_ns": 0,
                           "bytes": pd.array([pd.NA] * len(missing), dtype="Int64"), "gb_per_s": np.nan})
    out = pd.concat([agg, filler], ignore_index=True) if missing else agg
    return out.astype({"count": np.int64, "total_ns": np.int64, "bytes": "Int64"})


def memcpy_by_host_memory(trace: Trace) -> pd.DataFrame:
    """Copies with a host side, per ``"<direction> <host memory>"`` key (e.g.
    ``"HtoD Pageable"``). Columns: key, count, total_ns, bytes, gb_per_s."""
    copies = memcpy_events(trace)
    copies = copies[copies["host_memory"].notna()]
    return _aggregate(copies, "key").astype({"count": np.int64, "total_ns": np.int64, "bytes": "Int64"})


def memcpy_summary(trace: Trace) -> dict:
    """``{count, total_ns, bytes}`` of all copies (bytes None when none carries it)."""
    copies = memcpy_events(trace)
    nbytes = copies["bytes"]
    return {"count": len(copies), "total_ns": int(copies["dur_ns"].sum()),
            "bytes": int(nbytes.sum()) if nbytes.notna().any() else None}


def memset_summary(trace: Trace) -> dict:
    """``{count, total_ns, bytes}`` of memset events (bytes None when none carries it)."""
    work = trace.gpu_work
    rows = work[(work["kind"] == KIND_MEMSET).to_numpy()]
    nbytes = rows["bytes"]
    return {"count": len(rows), "total_ns": int(rows["dur_ns"].sum()),
            "bytes": int(nbytes.sum()) if nbytes.notna().any() else None}


def sync_calls(trace: Trace) -> pd.DataFrame:
    """Runtime calls that block the host until the GPU catches up (SYNC_CALL_NAMES:
    stream/device/event synchronize and synchronous copies, CUDA and HIP).

    Columns: name, count, total_ns, max_ns; largest total first.
    """
    runtime = trace.runtime
    rows = runtime[runtime["name"].isin(list(SYNC_CALL_NAMES)).to_numpy()]
    grouped = rows.groupby("name", observed=True)["dur_ns"].agg(count="size", total_ns="sum", max_ns="max")
    grouped = grouped.reset_index()
    grouped["name"] = grouped["name"].astype(str)
    return grouped.sort_values(["total_ns", "name"], ascending=[False, True], ignore_index=True)


CLASS_COLUMNS = ["label", "count", "total_ns", "bytes", "gb_per_s"]


def copy_classes(trace: Trace) -> pd.DataFrame:
    """One row per copy class with copies, then ``memset``: label, count, total_ns, bytes (Int64), gb_per_s.

    Host-memory keys come from ``memcpy_by_host_memory``; the copies of a
    direction that name no host side (DtoD, or an HtoD whose name says neither
    pageable nor pinned) are the direction's remainder in ``memcpy_by_direction``.
    """
    keyed = memcpy_by_host_memory(trace).rename(columns={"key": "label"})
    rows = [keyed[CLASS_COLUMNS]]
    for d in memcpy_by_direction(trace).itertuples(index=False):
        mine = keyed[keyed["label"].str.startswith(f"{d.direction} ")]
        count, total = d.count - int(mine["count"].sum()), d.total_ns - int(mine["total_ns"].sum())
        if count > 0:
            nbytes = pd.NA if pd.isna(d.bytes) else int(d.bytes) - int(mine["bytes"].fillna(0).sum())
            rows.append(_row(d.direction, count, total, nbytes))
    memset = memset_summary(trace)
    if memset["count"]:
        rows.append(_row("memset", memset["count"], memset["total_ns"], memset["bytes"]))
    out = pd.concat(rows, ignore_index=True)
    return out.astype({"count": np.int64, "total_ns": np.int64, "bytes": "Int64", "gb_per_s": float})


def _row(label: str, count: int, total_ns: int, nbytes) -> pd.DataFrame:
    gbps = np.nan if nbytes is None or pd.isna(nbytes) or total_ns <= 0 else nbytes / total_ns
    return pd.DataFrame({"label": [label], "count": [count], "total_ns": [total_ns],
                         "bytes": pd.array([None if nbytes is None or pd.isna(nbytes) else int(nbytes)], dtype="Int64"),
                         "gb_per_s": [gbps]})
