"""Exact conversion of trace numbers: decimal microsecond text -> integer nanoseconds.

``ts`` such as ``1712345678901234.567`` needs 19 digits, float64 keeps 16: the text is parsed,
vectorized over all values (odd ones through ``Decimal``), digits past the ns rounded half up.
"""

from __future__ import annotations

import decimal
import math
from typing import Any

import numpy as np


_MAX_INT_DIGITS = 16  # 16 integer digits of us + 3 of ns fit in uint64
_INT64_MAX = np.iinfo(np.int64).max
TIME_LIMIT_NS = 2**62  # |ts|, dur and ts + dur stay within this, so spans and sums fit in int64
_POW10 = np.array([10**k for k in range(20)], dtype=np.uint64)


def strict(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (dicts, lists and tuples walked):
    strict JSON, as ``--json`` output and ``sweep.json`` are."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "ndim", None) == 0:
        return strict(value.item())  # a numpy scalar
    return value


class NumberError(ValueError):
    """A value that is not a finite number in range; ``index`` says which one."""

    def __init__(self, index: int, text: bytes):
        super().__init__(f"not a finite number in range: {text[:40]!r}")
        self.index = index
        self.text = text


def us_text_to_ns(raws: list) -> np.ndarray:
    """Integer ns (int64) of a list of JSON number texts in microseconds (bytes-like)."""
    n = len(raws)
    if n == 0:
        return np.empty(0, np.int64)
    mat, lens = _char_matrix(raws)
    if mat is None:
        return _slow(raws, np.arange(n))
    out, slow = _fast(mat, lens)
    rows = np.flatnonzero(slow)
    if rows.size:
        out[rows] = _slow([raws[i] for i in rows], rows)
    return out


def _char_matrix(raws: list):
    """An (n, width) uint8 matrix of the texts, zero padded, and their lengths."""
    blob = np.frombuffer(b"\n".join(raws) + b"\n", dtype=np.uint8)
    ends = np.flatnonzero(blob == 10)
    if ends.size != len(raws):  # a raw value spanning lines: not a plain number
        return None, None
    starts = np.concatenate(([0], ends[:-1] + 1))
    lens = ends - starts
    width = int(lens.max())
    if width > 40 or int(lens.min()) == 0:
        return None, None
    mat = np.empty((ends.size, width), np.uint8)
    last = blob.size - 1
    for j in range(width):
        mat[:, j] = blob[np.minimum(starts + j, last)]
    mat[np.arange(width)[None, :] >= lens[:, None]] = 0
    return mat, lens


def _fast(mat: np.ndarray, lens: np.ndarray):
    """Vectorized parse of ``[-]digits[.digits]`` (Horner over the columns); the rows left over."""
    n, width = mat.shape
    neg = mat[:, 0] == 45
    acc = np.zeros(n, np.uint64)
    digits = np.zeros(n, np.int64)
    frac = np.zeros(n, np.int64)
    dots = np.zeros(n, np.int64)
    bad = np.zeros(n, bool)
    for j in range(width):
        col = mat[:, j]
        value = col - np.uint8(48)
        is_digit = value <= 9
        is_dot = col == 46
        acc = np.where(is_digit, acc * np.uint64(10) + value, acc)
        digits += is_digit
        dots += is_dot
        frac += is_digit & (dots > 0)
        bad |= ~(is_digit | is_dot | (col == 0) | (neg & (j == 0)))  # a leading minus is allowed
    whole = digits - frac  # digits before the dot
    slow = bad | (dots > 1) | (digits > 19) | (whole > _MAX_INT_DIGITS) | (whole < 1)
    shift = np.clip(frac - 3, 0, 19)
    half = np.where(shift > 0, _POW10[shift] // np.uint64(2), np.uint64(0))
    ns = np.where(frac <= 3, acc * _POW10[np.clip(3 - frac, 0, 3)], (acc + half) // _POW10[shift])
    slow |= ns > np.uint64(_INT64_MAX)
    out = ns.astype(np.int64)
    return np.where(neg, -out, out), slow


def _slow(raws: list, rows: np.ndarray) -> np.ndarray:
    """Decimal parse, one value at a time; raises NumberError naming the first bad one."""
    out = np.empty(len(raws), np.int64)
    for k, raw in enumerate(raws):
        text = bytes(raw)
        try:
            value = decimal.Decimal(text.decode("ascii")) * 1000
            ns = int(value.to_integral_value(rounding=decimal.ROUND_HALF_UP))
        except (decimal.InvalidOperation, UnicodeDecodeError, ValueError, OverflowError):
            raise NumberError(int(rows[k]), text) from None
        if abs(ns) > _INT64_MAX:
            raise NumberError(int(rows[k]), text)
        out[k] = ns
    return out


NA_INT = -(2**63)  # the decoder's default for an absent argument (see decode.Args)


def to_int64_values(values: list) -> np.ndarray:
    """int64 argument values: ints, integral floats, decimal or hex text (ROCm's ``"0x0"``);
    :data:`NA_INT` for anything else (null, bools, fractions, other text)."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        arr = np.array([_as_int(v) for v in values], dtype=object)
        return np.where(arr == None, NA_INT, arr).astype(np.int64)  # noqa: E711


def _as_int(value) -> int | None:
    if value is None or isinstance(value, bool) or value == NA_INT:
        return None
    if isinstance(value, int):
        return value if abs(value) <= _INT64_MAX else None
    if isinstance(value, float):
        whole = math.isfinite(value) and value.is_integer() and abs(value) <= _INT64_MAX
        return int(value) if whole else None
    try:
        number = int(str(value).strip(), 0)
    except ValueError:
        return None
    return number if abs(number) <= _INT64_MAX else None
