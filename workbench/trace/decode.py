"""Reading a trace file's bytes and decoding them straight into typed structs.

A full dict-of-dicts parse of a large trace costs several times its size in
memory. ``msgspec`` decodes into :class:`Event` structs that declare only the
fields the analysis uses (unknown keys are skipped without building objects),
and keeps ``ts``/``dur`` as raw text (:class:`msgspec.Raw`) so they convert to
exact integer nanoseconds later. Every failure becomes a :class:`TraceError`
naming the file and the problem.
"""
from __future__ import annotations

import gzip
import os
import re
import zlib
from pathlib import Path
from typing import Union

import msgspec

from ..errors import TraceError
from .numbers import NA_INT

Scalar = Union[int, float, str, bool, None]
_EMPTY_RAW = msgspec.Raw()


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys the analysis reads; values vary in type across traces.

    An absent key reads as :data:`~workbench.trace.numbers.NA_INT`, so the common
    all-int column converts in one C loop."""

    correlation: Scalar = NA_INT
    correlation_id: Scalar = msgspec.field(default=NA_INT, name="correlation id")
    device: Scalar = NA_INT
    stream: Scalar = NA_INT
    bytes: Scalar = NA_INT
    external_id: Scalar = msgspec.field(default=NA_INT, name="External id")


class Event(msgspec.Struct, gc=False):
    """One Chrome trace event; ``ts``/``dur`` stay undecoded text."""

    ph: str = ""
    name: Union[str, None] = None
    cat: str = ""
    ts: msgspec.Raw = _EMPTY_RAW
    dur: msgspec.Raw = _EMPTY_RAW
    pid: Union[int, str, float, None] = None
    tid: Union[int, str, float, None] = None
    args: Union[Args, None] = None


class TraceFile(msgspec.Struct, gc=False):
    """The top-level object torch.profiler writes; other keys are kept raw for ``meta``."""

    traceEvents: list[msgspec.Raw]
    deviceProperties: msgspec.Raw = _EMPTY_RAW
    displayTimeUnit: msgspec.Raw = _EMPTY_RAW
    schemaVersion: msgspec.Raw = _EMPTY_RAW
    distributedInfo: msgspec.Raw = _EMPTY_RAW
    baseTimeNanoseconds: msgspec.Raw = _EMPTY_RAW
    traceName: msgspec.Raw = _EMPTY_RAW


META_FIELDS = ("deviceProperties", "displayTimeUnit", "schemaVersion", "distributedInfo",
               "baseTimeNanoseconds", "traceName")
_DECODER = msgspec.json.Decoder(Union[TraceFile, list[msgspec.Raw]])
_CHUNK_DECODER = msgspec.json.Decoder(list[Event])
_AT = re.compile(r"`\$\[(\d+)\]")


def read_bytes(path: str | os.PathLike) -> bytes:
    """The JSON text of a ``.json`` or gzip file (recognized by its magic bytes)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a folder, not a trace file (give the .json or .json.gz inside)") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the trace file ({exc.strerror or exc})") from None
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{path}: truncated or corrupt gzip data ({exc}); re-copy or re-export the trace") from None


def decode(path: Path, data: bytes) -> tuple[list[msgspec.Raw], dict]:
    """The events (undecoded, one raw slice each) and raw top-level metadata of a trace.

    Events are decoded later in chunks by :func:`decode_events`, so the typed
    structs of only one chunk exist at a time: peak memory stays near the size
    of the JSON text rather than a multiple of it."""
    if not data or data.isspace():
        raise TraceError(f"{path}: empty file, not a trace")
    try:
        top = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise TraceError(f"{path}: not a PyTorch profiler trace: {_explain(exc)}") from None
    except msgspec.DecodeError as exc:
        raise TraceError(f"{path}: invalid JSON ({exc}); the file may be truncated") from None
    if isinstance(top, list):
        return top, {}
    return top.traceEvents, {k: getattr(top, k) for k in META_FIELDS}


def decode_events(path: Path, raws: list[msgspec.Raw], offset: int) -> list[Event]:
    """Typed events of a slice of the raw events (``offset``: index of the first)."""
    try:
        return _CHUNK_DECODER.decode(b"[" + b",".join(raws) + b"]")
    except msgspec.ValidationError as exc:
        where = _AT.sub(lambda m: f"`traceEvents[{int(m.group(1)) + offset}]", str(exc))
        raise TraceError(f"{path}: not a PyTorch profiler trace: {where}") from None
    except msgspec.DecodeError as exc:  # cannot happen for slices cut by the decoder
        raise TraceError(f"{path}: invalid JSON in traceEvents ({exc})") from None


def _explain(exc: msgspec.ValidationError) -> str:
    text = str(exc)
    if "Expected `object | array`" in text:
        return "the top level must be an object with a 'traceEvents' list"
    if "missing required field `traceEvents`" in text:
        return "no 'traceEvents' list"
    return text


def decode_meta(path: Path, raw_meta: dict) -> dict:
    """Small top-level fields decoded to plain Python (they are kilobytes at most)."""
    meta = {}
    for key, raw in raw_meta.items():
        if len(raw) == 0:
            continue
        try:
            meta[key] = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:  # cannot happen for raw cut by the decoder
            raise TraceError(f"{path}: unreadable {key!r}: {exc}") from None
    return meta
