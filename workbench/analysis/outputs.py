"""What a change costs in outputs: B's final outputs against A's, for the same input items (README).

``max_rel_error`` is the largest ``|b - a| / max(|a|, floor)``, floor 1e-3 of the largest ``|a|``
(a near-0 value does not make a tiny difference infinite). Outputs are converted outside every timed
region; errors are null when the numbers do not line up, the agreement when not class-like.

An output splits into items along its first axis; an item's numbers and class (:func:`item_view`):
an array or number: its values, class-like as a float vector of two or more (class: argmax) or an
integer (class: the value); JSON (``bytes``/``str`` that parse, or a dict): its numeric leaves,
identity fields (``id``, ``*_id``, :data:`CLASS_KEYS`) left out, the class the first
:data:`CLASS_KEYS` field met depth-first; anything else: nothing to compare."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

# items each configuration runs for its outputs (the first items of the shared source)
OUTPUT_ITEMS = 64
AGREEMENT_THRESHOLD = 0.99
CLASS_KEYS = ("label", "class", "item_id", "prediction")
NONE = {"max_abs_error": None, "max_rel_error": None, "argmax_agreement": None}


def split_items(output: Any) -> list[Any]:
    """One request's final output as a list of per-item values."""
    if isinstance(output, np.ndarray):
        return list(output) if output.ndim >= 1 else [output]
    if isinstance(output, (list, tuple)):
        return list(output)
    return [output]


def item_view(item: Any) -> tuple[np.ndarray | None, Any]:
    """``(numbers, class)`` of one item; None where it has none."""
    if isinstance(item, (bytes, str)):
        try:
            item = json.loads(item)
        except (ValueError, UnicodeDecodeError):
            return None, None
    if isinstance(item, dict):
        numbers: list[float] = []
        _leaves(item, numbers)
        return (np.asarray(numbers, dtype="float64") if numbers else None), _class_of(item)
    try:
        values = np.asarray(item)
    except (ValueError, TypeError):
        return None, None
    if values.dtype.kind not in "biuf":
        return None, None
    flat = values.astype("float64").ravel()
    if values.dtype.kind in "iu" and values.size == 1:
        return flat, int(values.ravel()[0])
    if values.dtype.kind == "f" and values.size >= 2:
        return flat, int(np.argmax(flat))
    return flat, None


def _leaves(value: Any, out: list[float]) -> None:
    """Append JSON ``value``'s numeric leaves to ``out`` depth-first (booleans are not numbers)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        out.append(float(value))
    elif isinstance(value, dict):
        for k, v in value.items():
            if not (k in CLASS_KEYS or k == "id" or k.endswith("_id")):  # identity fields
                _leaves(v, out)
    elif isinstance(value, list):
        for v in value:
            _leaves(v, out)


def _class_of(value: Any) -> Any:
    if isinstance(value, dict):
        for key in CLASS_KEYS:
            found = value.get(key)
            if isinstance(found, (str, int)) and not isinstance(found, bool):
                return found
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            found = _class_of(v)
            if found is not None:
                return found
    return None


def output_agreement(
    requests_a: Mapping[int, Any],
    requests_b: Mapping[int, Any],
    agree: Callable[[Any, Any], float] | None = None,
) -> dict[str, Any]:
    """``{max_abs_error, max_rel_error, argmax_agreement, items}`` of B's outputs against A's.

    requests_a/requests_b: first item index -> that request's final output; ``agree`` is called
    on requests starting at the same item."""
    items_a, items_b = _by_item(requests_a), _by_item(requests_b)
    shared = sorted(set(items_a) & set(items_b))
    if not shared:
        return dict(NONE, items=0)
    views = [(item_view(items_a[i]), item_view(items_b[i])) for i in shared]
    out = dict(NONE, items=len(shared)) | _errors([(va[0], vb[0]) for va, vb in views])
    classes = [(va[1], vb[1]) for va, vb in views]
    if all(a is not None and b is not None for a, b in classes):
        out["argmax_agreement"] = round(sum(a == b for a, b in classes) / len(classes), 6)
    if agree is not None:
        both = sorted(set(requests_a) & set(requests_b))
        shares = [float(agree(requests_a[k], requests_b[k])) for k in both]
        out["argmax_agreement"] = round(sum(shares) / len(shares), 6) if shares else None
    return out


def _by_item(requests: Mapping[int, Any]) -> dict[int, Any]:
    """Item index -> that item's output."""
    out = {}
    for first, output in requests.items():
        for offset, item in enumerate(split_items(output)):
            out[first + offset] = item
    return out


def _errors(pairs: list[tuple[np.ndarray | None, np.ndarray | None]]) -> dict[str, Any]:
    if not pairs or any(a is None or b is None or a.shape != b.shape for a, b in pairs):
        return {}
    a = np.concatenate([p[0] for p in pairs])
    b = np.concatenate([p[1] for p in pairs])
    if a.size == 0 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return {}
    diff = np.abs(b - a)
    floor = max(1e-3 * float(np.abs(a).max()), 1e-12)
    rel = diff / np.maximum(np.abs(a), floor)
    return {"max_abs_error": _round(float(diff.max())), "max_rel_error": _round(float(rel.max()))}


def _round(x: float) -> float:
    return float(f"{x:.6g}") if math.isfinite(x) else None


def agreement_text(outputs: dict[str, Any] | None) -> str:
    """``argmax agrees 98.4 % of 64 items, max abs error 0.012`` (or why there is nothing to say)."""
    if not outputs or not outputs.get("items"):
        return "outputs not compared"
    parts = []
    if outputs.get("argmax_agreement") is not None:
        parts.append(
            f"argmax agrees on {100 * outputs['argmax_agreement']:.1f} % of {outputs['items']} items"
        )
    if outputs.get("max_abs_error") is not None:
        parts.append(
            f"max abs error {outputs['max_abs_error']:.3g} (rel {outputs['max_rel_error']:.3g})"
        )
    return (
        ", ".join(parts)
        or f"outputs of {outputs['items']} items not comparable (not numbers or classes)"
    )
