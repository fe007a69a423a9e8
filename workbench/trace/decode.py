"""Decoding a trace file's bytes straight into typed structs, and saying where undecodable text fails.

``msgspec`` decodes into :class:`Event` structs of only the fields the analysis uses (a dict per
event costs several times the file's size), ``ts``/``dur`` kept as text for exact nanoseconds. The
helpers at the end find *where* a malformed text fails, for one :class:`TraceError`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Union

import msgspec
import numpy as np

from ..errors import TraceError
from .numbers import NA_INT
from .read import read_bytes, utf8_error_offset

Scalar = Union[int, float, str, bool, None]
_EMPTY_RAW = msgspec.Raw()


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys the analysis reads (types vary across traces); absent: ``NA_INT``, so the
    common all-int column converts in one C loop."""

    correlation: Scalar = NA_INT
    correlation_id: Scalar = msgspec.field(default=NA_INT, name="correlation id")
    device: Scalar = NA_INT
    stream: Scalar = NA_INT
    bytes: Scalar = NA_INT
    external_id: Scalar = msgspec.field(default=NA_INT, name="External id")
    # record_shapes=True
    input_dims: msgspec.Raw = msgspec.field(default=_EMPTY_RAW, name="Input Dims")


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


META_FIELDS = TraceFile.__struct_fields__[1:]  # the fields after traceEvents
_DECODER = msgspec.json.Decoder(Union[TraceFile, list[msgspec.Raw]])
_CHUNK_DECODER = msgspec.json.Decoder(list[Event])
_EVENT_DECODER = msgspec.json.Decoder(Event)
_AT = re.compile(r"`\$\[(\d+)\]")


def read_raw(path: Path, max_bytes: int) -> tuple[list[msgspec.Raw], dict]:
    """:func:`decode` of the file's text (read with the ``max_bytes`` cap): no pandas needed, so a
    caller can run it while pandas imports in another thread (gunzip releases the GIL)."""
    return decode(path, read_bytes(path, max_bytes))


# msgspec's words for a top level that is not a trace -> plain ones
_TOP_LEVEL = {
    "Expected `object | array`": "the top level must be an object with a 'traceEvents' list",
    "missing required field `traceEvents`": "no 'traceEvents' list",
}


def decode(path: Path, data) -> tuple[list[msgspec.Raw], dict]:
    """The events (raw slices, decoded in chunks by :func:`decode_events`) and raw metadata."""
    view = memoryview(data)  # empty or whitespace only, 1 MiB at a time: no copy of a large text
    if all(bytes(view[i : i + (1 << 20)]).isspace() for i in range(0, len(view), 1 << 20)):
        raise TraceError(f"{path}: empty file, not a trace")
    try:
        top = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        why = next((v for k, v in _TOP_LEVEL.items() if k in str(exc)), str(exc))
        raise TraceError(f"{path}: not a PyTorch profiler trace: {why}") from None
    except msgspec.DecodeError as exc:
        raise TraceError(f"{path}: {_syntax(data, str(exc))}") from None
    except (RecursionError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: {_undecodable(data, exc)}") from None
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
    except (RecursionError, UnicodeDecodeError):
        raise TraceError(f"{path}: {_bad_event(raws, offset)}") from None


def _bad_event(raws: list[msgspec.Raw], offset: int) -> str:
    """Which event of a chunk the decoder could not read (too deep or invalid UTF-8), and where in it."""
    for i, raw in enumerate(raws):
        try:
            _EVENT_DECODER.decode(raw)
        except (RecursionError, UnicodeDecodeError) as exc:
            return f"traceEvents[{offset + i}]: {_undecodable(raw, exc, ' of the event')}"
        except msgspec.MsgspecError:
            continue
    return f"traceEvents[{offset}:{offset + len(raws)}]: undecodable (too deeply nested or invalid UTF-8)"


def _syntax(data, message: str) -> str:
    """Plain words for a JSON syntax error, with its byte offset."""
    if "truncated" in message:
        return (
            f"invalid JSON: the text ends (at byte {len(data):,}) in the middle of a value; "
            "the file is truncated: re-copy or re-export the trace"
        )
    at = syntax_offset(message)
    if at is None:
        return f"invalid JSON ({message})"
    token = non_json_token(data, at)
    at = token[1] if token else at
    where = f"at byte {at:,}{_in_key(data, at)}"
    if token:
        return (
            f"invalid JSON {where}: {token[0]} is not a JSON number "
            "(write the trace with null there, or json.dumps(..., allow_nan=False))"
        )
    return f"invalid JSON {where}: {message.replace('JSON is malformed: ', '').split(' (byte')[0]}"


def _undecodable(data, exc: RecursionError | UnicodeDecodeError, within: str = "") -> str:
    """Plain words, with the byte offset, for JSON nested too deep to decode or invalid UTF-8."""
    if isinstance(exc, RecursionError):
        depth, at = deepest_nesting(data)
        return (
            f"JSON nested {depth:,} levels deep at byte {at:,}{within}{_in_key(data, at)}, "
            "too deep to decode; a profiler trace is never nested like this"
        )
    found = utf8_error_offset(data)
    if found is None:
        return f"invalid UTF-8 text ({exc.reason}); re-export the trace as UTF-8"
    at, reason = found
    byte = bytes(memoryview(data)[at : at + 1]).hex()
    return (
        f"invalid UTF-8 at byte {at:,}{within}{_in_key(data, at)}: byte 0x{byte}, {reason}; "
        "re-export the trace as UTF-8"
    )


def _in_key(data, at: int) -> str:
    """`` (in 'name')`` for the key whose value holds byte ``at``; empty when there is none."""
    key = key_before(data, at)
    return f" (in {key!r})" if key else ""


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
        except (RecursionError, UnicodeDecodeError) as exc:
            raise TraceError(f"{path}: unreadable {key!r}: {_undecodable(raw, exc)}") from None
    return meta


# -- locating what made a JSON text undecodable (run only after a failure) --
_BLOCK = 1 << 20
_OPEN = (ord("["), ord("{"))
_CLOSE = (ord("]"), ord("}"))
_KEY = re.compile(rb'"((?:[^"\\]|\\.){0,80})"\s*:')
_NON_JSON = ("NaN", "-Infinity", "Infinity", "-NaN", "nan", "-nan", "inf", "-inf")


def deepest_nesting(data) -> tuple[int, int]:
    """``(depth, offset)``: the deepest nesting of arrays/objects (not in strings) and where."""
    view = memoryview(data).cast("B")
    depth, in_string, backslashes = 0, False, 0
    best, where = 0, 0
    for start in range(0, len(view), _BLOCK):
        b = np.frombuffer(view[start : start + _BLOCK], dtype=np.uint8)
        # a byte follows an odd run of backslashes (``backslashes``: the run ending the last block)
        idx = np.arange(b.size)
        last_other = np.maximum.accumulate(np.where(b != 92, idx, -1))
        run = idx - last_other + np.where(last_other < 0, backslashes, 0)  # ending at each byte
        escaped = (np.concatenate([[backslashes], run[:-1]]) % 2).astype(bool)
        quote = (b == 34) & ~escaped
        inside = (np.cumsum(quote) % 2).astype(bool) ^ in_string
        delta = (np.isin(b, _OPEN).astype(np.int64) - np.isin(b, _CLOSE)) * ~inside
        level = depth + np.cumsum(delta)
        if level.size and int(level.max()) > best:
            where = start + int(np.argmax(level))
            best = int(level.max())
        depth = int(level[-1]) if level.size else depth
        in_string = bool(inside[-1]) if inside.size else in_string
        others = np.flatnonzero(b != 92)  # the run of backslashes ending the block
        backslashes = backslashes + b.size if others.size == 0 else b.size - 1 - int(others[-1])
    return best, where


def key_before(data, offset: int) -> str | None:
    """The last JSON object key that starts before ``offset`` (within 4 KiB), or None."""
    window = bytes(memoryview(data)[max(0, offset - 4096) : offset])
    keys = _KEY.findall(window)
    return keys[-1].decode("utf-8", "replace") if keys else None


def non_json_token(data, offset: int) -> tuple[str, int] | None:
    """``(token, start)`` for a signed ``NaN``/``Infinity`` (not JSON) at ``offset``; else None."""
    start = offset
    if offset > 0 and bytes(memoryview(data)[offset - 1 : offset]) == b"-":
        start -= 1
    head = bytes(memoryview(data)[start : start + 9])
    for name in _NON_JSON:
        if head.startswith(name.encode()):
            return name, start
    return None


def syntax_offset(message: str) -> int | None:
    """The byte offset in a msgspec decode error message (``... (byte 74)``), if any."""
    found = re.search(r"\(byte (\d+)\)", message)
    return int(found.group(1)) if found else None
