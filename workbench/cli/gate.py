"""``workbench gate``: fail CI when NEW is really slower than BASE; say so when it cannot tell (the
README's "A regression gate in CI"; each metric judged by ``analysis.verdicts.gate_decision``).
A ``compare --json`` file (docs/json.md, "compare") is decoded once into typed structures by
:func:`decode_comparisons`, which refuses what does not fit with one line naming the field and its
value (ConfigError, exit 2).
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from ..analysis.verdicts import INCONCLUSIVE, REGRESSION, VERDICTS, gate_decision
from ..batching.summary import LAG_P99_LIMIT_MS, behind_schedule
from ..errors import ConfigError, value_at
from ..files import MAX_JSON_BYTES, read_capped
from ..record.folder import META_FILE, inside, read_meta
from . import EXIT_INCONCLUSIVE
from .compare import compare_saved
from .output import OptionError

# finite and >= 0: msgspec's bounds reject NaN (no comparison holds) and +-Infinity
Ratio = Annotated[float, msgspec.Meta(ge=0.0, le=1e300)]
Verdict = Literal[VERDICTS]  # type: ignore[valid-type] - a tuple of the four verdicts


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


_THRESHOLD = re.compile(r"^\+?(\d+(?:\.\d+)?)\s*%?$")
RERUN = "too noisy to tell: rerun quieter or longer"
MAX_THRESHOLD_PCT = 1000.0
THRESHOLD_RANGE = f"in [0, {MAX_THRESHOLD_PCT:g}] %"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "gate",
        help="exit 1 when NEW is really slower than BASE, 4 when it cannot tell (CI)",
        description="Regression gate: a metric whose verdict is slower with its ratio and "
        "interval above 1 + threshold fails (exit 1); one too noisy to tell is "
        "exit 4; otherwise exit 0; bad input exit 2.",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="BASE NEW (two saved run folders), or one `compare --json` output file",
    )
    range_text = THRESHOLD_RANGE.replace("%", "%%")  # argparse's help escapes a percent sign
    for metric, pct in (("p50", 5), ("p99", 10)):
        p.add_argument(
            f"--{metric}",
            default=f"+{pct}%",
            type=functools.partial(threshold, option=f"--{metric}"),
            help=f"allowed {metric} slow-down, default +{pct}%% [{range_text}]",
        )
    p.add_argument(
        "--stages", action="store_true", help="check every stage too, not only end to end"
    )
    p.set_defaults(func=run)


def threshold(text: str, option: str = "threshold") -> float:
    """``+5%`` (or ``5%``, ``5``) as 0.05: an allowed slow-down; anything else (a negative, a NaN, over
    1000 %) an OptionError, which argparse lets through (one line, exit 2)."""
    m = _THRESHOLD.match(str(text).strip())
    if not m or float(m.group(1)) > MAX_THRESHOLD_PCT:
        raise OptionError(
            f"{option} {text!r}: expected a percentage such as +5%, {THRESHOLD_RANGE}"
        )
    return float(m.group(1)) / 100.0


def load_comparisons(inputs: list[str]) -> list[tuple[str, CompareFile, Comparison]]:
    """``(label, file, comparison)`` per comparison to check, from two saved runs or one compare JSON."""
    if len(inputs) == 2:
        found = compare_saved(inputs[0], inputs[1])
        top, comps = decode_comparisons(found, f"{inputs[1]} against {inputs[0]}")
        return [(f"{inputs[1]} against {inputs[0]} (separate runs)", top, c) for c in comps]
    if len(inputs) != 1:
        raise ConfigError(
            f"gate takes BASE NEW (two run folders) or one compare --json file, got {len(inputs)} inputs"
        )
    path = Path(inputs[0])
    if path.is_dir():
        raise ConfigError(
            f"{path} is a folder: give BASE and NEW run folders, or one compare --json file"
        )
    top, comps = read_compare_file(str(path))
    labels = [c.label for c in top.configs]
    return [(f"{labels[c.b]} against {labels[0]}", top, c) for c in comps]


def decisions(
    top: CompareFile, comp: Comparison, limits: dict[str, float], stages: bool
) -> list[tuple[str, str]]:
    """``(outcome, line)`` for every metric that is a regression or inconclusive; a failed side is a regression."""
    if comp.end_to_end is None:
        return [(REGRESSION, f"not compared: {comp.error}")]
    resolution = None
    if top.kind == "separate runs":  # without a resolution, nothing can be ruled out
        found = top.resolution.min_difference if top.resolution else None
        resolution = float("inf") if found is None else found
    out = []
    tokens = comp.tokens.metrics if comp.tokens else []  # a streaming pipeline's TTFT, TPOT, ITL
    for e in [comp.end_to_end, *tokens, *(comp.stages if stages else [])]:
        name = "end to end" if e.name == "end_to_end" else f"stage {e.name}"
        name = e.name.upper() if any(e is t for t in tokens) else name
        for metric, limit in limits.items():
            ratio, ci, verdict = (getattr(e, f"{metric}_{x}") for x in ("ratio", "ci", "verdict"))
            outcome = gate_decision(ratio, ci, verdict, limit, resolution=resolution)
            figures = f"{100 * (ratio - 1):+.1f} % (ratio {ratio:.3f}, interval [{ci[0]:.3f}, {ci[1]:.3f}])"
            if outcome == REGRESSION:
                out.append((outcome, f"{name} {metric}: {figures} exceeds +{100 * limit:g} %"))
            elif outcome == INCONCLUSIVE:
                why = f"verdict {verdict}"
                if resolution is not None and resolution > limit:
                    why = f"the runs resolve only {100 * resolution:.1f} %"
                line = f"{name} {metric}: {figures} against +{100 * limit:g} %: {why}; {RERUN}"
                out.append((outcome, line))
    return out


def behind(inputs: list[str]) -> list[str]:
    """One line per saved run (of BASE NEW) whose load generator fell behind its schedule."""
    if len(inputs) != 2:  # a compare --json file: its configurations were measured closed-loop
        return []
    metas = [(path, read_meta(inside(Path(path), META_FILE))) for path in inputs]
    loads = [(path, getattr(meta, "load", None)) for path, meta in metas]  # load and served runs
    return [
        f"{path}: the load generator fell behind its schedule (lag p99 "
        f"{load.generator_lag_p99_ms:.3f} ms >= {LAG_P99_LIMIT_MS:g} ms): it sent another load "
        "than asked for, so its latencies are not judged"
        for path, load in loads
        if load is not None and behind_schedule(load.generator_lag_p99_ms)
    ]


def run(args) -> int:
    limits = {"p50": args.p50, "p99": args.p99}
    compared = load_comparisons(args.inputs)  # refuses what cannot be compared (exit 2) first
    lagging = behind(args.inputs)
    for line in lagging:
        print(f"gate: INCONCLUSIVE {line}")
    if lagging:
        print(f"gate: inconclusive (rerun at a rate the generator holds; exit {EXIT_INCONCLUSIVE})")
        return EXIT_INCONCLUSIVE
    found = [
        (label, d)
        for label, top, comp in compared
        for d in decisions(top, comp, limits, args.stages)
    ]
    for label, (outcome, line) in found:
        print(f"gate: {'FAIL' if outcome == REGRESSION else 'INCONCLUSIVE'} {label}: {line}")
    outcomes = {outcome for _, (outcome, _) in found}
    if REGRESSION in outcomes:
        return 1
    if INCONCLUSIVE in outcomes:
        print(f"gate: inconclusive ({RERUN}; exit {EXIT_INCONCLUSIVE})")
        return EXIT_INCONCLUSIVE
    within = f"p50 within +{100 * args.p50:g} %, p99 within +{100 * args.p99:g} %"
    print(f"gate: ok ({within}, every interval resolved)")
    return 0
