"""Strict JSON for every ``--json`` output: no NaN, no Infinity (RFC 8259), numpy scalars as numbers.

A value that is not a finite number becomes ``null``; the object it sits in
says why where the reason is not already plain (a summary of zero requests
has ``count: 0`` beside its null percentiles). Everything a command prints
with ``--json`` goes through :func:`dumps`, so a consumer's strict parser
(``jq``, JavaScript's ``JSON.parse``, Go's ``encoding/json``) never fails on it.
"""
from __future__ import annotations

import json
import math
from typing import Any


def strict(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (dicts, lists and tuples walked)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "ndim", None) == 0:
        return strict(value.item())  # a numpy scalar
    return value


def dumps(value: Any, **kw) -> str:
    """``json.dumps`` of :func:`strict` ``(value)``; anything else not JSON is shown as text (``default=str``)."""
    kw.setdefault("default", str)
    return json.dumps(strict(value), allow_nan=False, **kw)
