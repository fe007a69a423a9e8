"""A ``compare --json`` file (docs/json.md, "compare"), decoded once into typed structures:
``workbench gate`` reads a comparison only through :func:`decode_comparisons`, which refuses what
does not fit with one line naming the field and its value (ConfigError, exit 2)."""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Literal

import msgspec

from ..errors import ConfigError, value_at
from ..files import MAX_JSON_BYTES, read_capped
from .verdicts import FASTER, NO_DIFFERENCE, SLOWER, TOO_NOISY, VERDICTS

# finite and >= 0: msgspec's bounds reject NaN (no comparison holds) and +-Infinity
Ratio = Annotated[float, msgspec.Meta(ge=0.0, le=1e300)]
Verdict = Literal[TOO_NOISY, SLOWER, FASTER, NO_DIFFERENCE]  # type: ignore[valid-type]


class Entry(msgspec.Struct, frozen=True):
    """One stage (or ``end_to_end``): ratios B/A, their intervals and per-metric verdicts."""

    name: str
    p50_ratio: Ratio
    p50_ci: tuple[Ratio, Ratio]
    p50_verdict: Verdict
    p99_ratio: Ratio
    p99_ci: tuple[Ratio, Ratio]
    p99_verdict: Verdict

    def __post_init__(self) -> None:
        for metric in ("p50", "p99"):
            lo, hi = getattr(self, f"{metric}_ci")
            ratio = getattr(self, f"{metric}_ratio")
            if lo > hi:
                raise ValueError(
                    f"{metric}_ci = [{lo}, {hi}]: inverted interval (low end above high end)"
                )
            if not lo <= ratio <= hi:
                raise ValueError(
                    f"{metric}_ratio = {ratio}: outside its own interval {metric}_ci = [{lo}, {hi}]"
                )


class Tokens(msgspec.Struct, frozen=True):
    """A streaming pipeline's ``ttft``, ``tpot`` and ``itl`` entries."""

    metrics: list[Entry] = []


class Comparison(msgspec.Struct, frozen=True):
    """B (configuration index ``b``) against A; ``end_to_end`` null only with the ``error`` that says why."""

    b: Annotated[int, msgspec.Meta(ge=1)] = 1
    stages: list[Entry] = []
    end_to_end: Entry | None = None
    error: str | None = None
    tokens: Tokens | None = None

    def __post_init__(self) -> None:
        if self.end_to_end is None and not self.error:
            raise ValueError("end_to_end = null: no result and no error saying why")


class ConfigLabel(msgspec.Struct, frozen=True):
    label: str


class Resolution(msgspec.Struct, frozen=True):
    min_difference: Ratio | None = None


class CompareFile(msgspec.Struct, frozen=True):
    """The top level of ``compare --json``: the first comparison inline, the others in ``comparisons``."""

    configs: Annotated[list[ConfigLabel], msgspec.Meta(min_length=2)]
    stages: list[Entry] = []
    end_to_end: Entry | None = None
    error: str | None = None
    comparisons: list[Comparison] | None = None
    kind: Literal["interleaved", "separate runs"] = "interleaved"
    resolution: Resolution | None = None
    tokens: Tokens | None = None

    def __post_init__(self) -> None:
        if self.end_to_end is None and not self.error:
            raise ValueError("end_to_end = null: no result and no error saying why")
        for comp in self.comparisons or []:
            if comp.b >= len(self.configs):
                raise ValueError(
                    f"comparisons: b = {comp.b}: no such configuration ({len(self.configs)} configs)"
                )


_AT = re.compile(r"^(?P<why>.*) - at `\$(?P<path>.*)`$", re.S)
_MISSING = re.compile(r"missing required field `(?P<field>[^`]+)`")


def decode_comparisons(data: Any, source: str) -> tuple[CompareFile, list[Comparison]]:
    """The file and its comparisons (the inline one first), from parsed JSON."""
    try:
        found = msgspec.convert(data, CompareFile, strict=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(str(exc), data)}") from None
    first = Comparison(1, found.stages, found.end_to_end, found.error, found.tokens)
    return found, list(found.comparisons or [first])


def read_compare_file(path: str) -> tuple[CompareFile, list[Comparison]]:
    """Read and decode a ``compare --json`` file (NaN/Infinity are read, then refused by
    the schema with their field); ConfigError naming the file and what is wrong."""
    raw = read_capped(path, MAX_JSON_BYTES, ConfigError, "compare --json file")
    try:
        data = json.loads(raw.decode("utf-8"))
        json.dumps(data, ensure_ascii=False).encode("utf-8")  # a lone surrogate cannot be printed
    except RecursionError:
        raise ConfigError(f"{path}: not a compare --json file (nested too deep to read)") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start:,}: {exc.reason})") from None
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
        raise ConfigError(f"{path}: holds a lone surrogate {bad}, which is not text") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not a readable compare --json file ({exc})") from None
    if not isinstance(data, dict) or "configs" not in data or "end_to_end" not in data:
        raise ConfigError(
            f"{path}: not a compare --json output (needs configs, stages and end_to_end)"
        )
    return decode_comparisons(data, path)


def _describe(message: str, data: Any) -> str:
    """``field = value: what is wrong`` from msgspec's ``... - at `$.a.b[0]``` message."""
    m = _AT.match(message)
    if not m:
        return message
    why, path = m.group("why"), m.group("path").lstrip(".")
    missing = _MISSING.search(why)
    if missing:
        return f"{_join(path, missing.group('field'))}: missing"
    if why.startswith(("p50_", "p99_", "end_to_end", "comparisons")):  # our __post_init__'s
        return _join(path, why)
    value = value_at(data, path, None)
    if isinstance(value, float) and not math.isfinite(value):
        why = "not a finite number"
    elif why.startswith("Invalid enum value"):
        why = "expected one of: " + ", ".join(VERDICTS)
    return f"{path} = {_show(value)}: {why[0].lower() + why[1:]}"


def _join(path: str, rest: str) -> str:
    return f"{path}.{rest}" if path else rest


def _show(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return json.dumps(value)
