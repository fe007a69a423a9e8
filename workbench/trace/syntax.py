"""Locating what made a JSON text undecodable, for error messages (only run after a failure).

The decoder says *that* a text is nested too deeply or malformed, not always
*where* or *why*. These helpers find the place: the byte offset of the deepest
nesting (a vectorized scan that skips string contents), the JSON key a byte
offset falls in, and a plain-words name for tokens JSON does not allow
(``NaN``, ``Infinity``: Python's ``json.dumps`` writes them).
"""

from __future__ import annotations

import re

import numpy as np

_BLOCK = 1 << 20
_OPEN = (ord("["), ord("{"))
_CLOSE = (ord("]"), ord("}"))
_KEY = re.compile(rb'"((?:[^"\\]|\\.){0,80})"\s*:')
_NON_JSON = ("NaN", "-Infinity", "Infinity", "-NaN", "nan", "-nan", "inf", "-inf")


def deepest_nesting(data) -> tuple[int, int]:
    """``(depth, offset)``: the largest nesting depth of arrays/objects and the byte offset
    where it is first reached (brackets inside strings are not counted)."""
    view = memoryview(data).cast("B")
    depth, in_string, backslashes = 0, False, 0
    best, where = 0, 0
    for start in range(0, len(view), _BLOCK):
        b = np.frombuffer(view[start : start + _BLOCK], dtype=np.uint8)
        escaped = _escaped(b, backslashes)
        quote = (b == 34) & ~escaped
        inside = (np.cumsum(quote) % 2).astype(bool) ^ in_string
        delta = (np.isin(b, _OPEN).astype(np.int64) - np.isin(b, _CLOSE)) * ~inside
        level = depth + np.cumsum(delta)
        if level.size and int(level.max()) > best:
            where = start + int(np.argmax(level))
            best = int(level.max())
        depth = int(level[-1]) if level.size else depth
        in_string = bool(inside[-1]) if inside.size else in_string
        backslashes = _trailing_backslashes(b, backslashes)
    return best, where


def _escaped(b: np.ndarray, carried: int) -> np.ndarray:
    """True where a byte follows an odd run of backslashes (``carried``: run ending the previous block)."""
    idx = np.arange(b.size)
    last_other = np.maximum.accumulate(np.where(b != 92, idx, -1))
    run = idx - last_other + np.where(last_other < 0, carried, 0)  # backslashes ending at each byte
    before = np.concatenate([[carried], run[:-1]])
    return (before % 2).astype(bool)


def _trailing_backslashes(b: np.ndarray, carried: int) -> int:
    others = np.flatnonzero(b != 92)
    return carried + b.size if others.size == 0 else b.size - 1 - int(others[-1])


def key_before(data, offset: int) -> str | None:
    """The last JSON object key that starts before ``offset`` (within 4 KiB), or None."""
    window = bytes(memoryview(data)[max(0, offset - 4096) : offset])
    keys = _KEY.findall(window)
    return keys[-1].decode("utf-8", "replace") if keys else None


def non_json_token(data, offset: int) -> tuple[str, int] | None:
    """``(token, start)`` for ``NaN``/``Infinity`` (or similar, with its sign) at ``offset``, which
    JSON does not allow (Python's ``json.dumps`` writes them); else None."""
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
