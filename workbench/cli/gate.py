"""``workbench gate``: fail CI when NEW is really slower than BASE.

    python -m workbench gate BASE NEW [--p50 +5%] [--p99 +10%] [--stages]
    python -m workbench gate COMPARE.json [--p50 +5%] [--p99 +10%] [--stages]

BASE and NEW are two saved runs (compared as separate runs, see
``workbench compare RUN_A RUN_B``), or one file written by
``workbench compare ... --json`` (B is NEW, A is BASE; with more than two
configurations every B is checked against A). A metric fails when NEW is
slower beyond its threshold *and* the difference is real: the point estimate
of the ratio NEW/BASE is above ``1 + threshold`` and its interval lies above 1.
End to end is always checked, each stage with ``--stages``. Exit 1 with one
line per failing metric (or per comparison that failed every request), 0
otherwise, 2 on bad input.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError

_THRESHOLD = re.compile(r"^\+?(\d+(?:\.\d+)?)\s*%?$")


def register(subparsers) -> None:
    p = subparsers.add_parser("gate", help="exit 1 when NEW is really slower than BASE (for CI)",
                              description="Regression gate: NEW/BASE ratio above 1 + threshold with its interval "
                                          "above 1 fails (exit 1); otherwise exit 0; bad input exit 2.")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="BASE NEW (two saved run folders), or one `compare --json` output file")
    p.add_argument("--p50", default="+5%", type=threshold, help="allowed p50 slow-down, default +5%%")
    p.add_argument("--p99", default="+10%", type=threshold, help="allowed p99 slow-down, default +10%%")
    p.add_argument("--stages", action="store_true", help="check every stage too, not only end to end")
    p.set_defaults(func=run)


def threshold(text: str) -> float:
    """``+5%`` (or ``5%``, ``5``) as 0.05: a percentage slow-down that is allowed."""
    m = _THRESHOLD.match(str(text).strip())
    if not m:
        raise ConfigError(f"threshold {text!r}: expected a percentage such as +5%")
    return float(m.group(1)) / 100.0


def load_comparisons(inputs: list[str]) -> list[dict[str, Any]]:
    """The comparisons to check: ``[{"label", "stages", "end_to_end"}]`` from two runs or one compare JSON."""
    if len(inputs) == 2:
        from .compare import compare_saved

        found = compare_saved(inputs[0], inputs[1])
        return [{"label": f"{inputs[1]} against {inputs[0]} (separate runs)", **found}]
    if len(inputs) != 1:
        raise ConfigError(f"gate takes BASE NEW (two run folders) or one compare --json file, got {len(inputs)} inputs")
    return _from_json(Path(inputs[0]))


def _from_json(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        raise ConfigError(f"{path} is a folder: give BASE and NEW run folders, or one compare --json file")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable compare --json file ({exc})") from exc
    if not isinstance(data, dict) or "configs" not in data or "end_to_end" not in data:
        raise ConfigError(f"{path}: not a compare --json output (needs configs, stages and end_to_end)")
    labels = [c.get("label", str(i)) for i, c in enumerate(data["configs"])]
    comps = data.get("comparisons") or [{"b": 1, "stages": data.get("stages") or [], "end_to_end": data["end_to_end"],
                                         "error": data.get("error")}]
    return [{"label": f"{labels[comp['b']]} against {labels[0]}", **comp} for comp in comps]


def failures(comparison: dict[str, Any], limits: dict[str, float], stages: bool) -> list[str]:
    """One line per metric where NEW is slower beyond its limit and the interval is above 1.

    A comparison that could not be made because every request of a side failed is one failing line.
    """
    if comparison.get("end_to_end") is None:
        return [f"not compared: {comparison.get('error') or 'no end-to-end result'}"]
    entries = [comparison["end_to_end"], *(comparison.get("stages") or [] if stages else [])]
    lines = []
    for e in entries:
        for metric, limit in limits.items():
            ratio, ci = e.get(f"{metric}_ratio"), e.get(f"{metric}_ci") or [None, None]
            if ratio is None or ci[0] is None:
                continue
            if ratio > 1.0 + limit and ci[0] > 1.0:
                name = "end to end" if e["name"] == "end_to_end" else f"stage {e['name']}"
                lines.append(f"{name} {metric}: {100 * (ratio - 1):+.1f} % (ratio {ratio:.3f}, interval "
                             f"[{ci[0]:.3f}, {ci[1]:.3f}]) exceeds +{100 * limit:g} %")
    return lines


def run(args) -> int:
    limits = {"p50": args.p50, "p99": args.p99}
    failed = 0
    for comp in load_comparisons(args.inputs):
        for line in failures(comp, limits, args.stages):
            print(f"gate: FAIL {comp['label']}: {line}")
            failed += 1
    if failed:
        return 1
    print(f"gate: ok (p50 within +{100 * args.p50:g} %, p99 within +{100 * args.p99:g} % or not a real difference)",
          file=sys.stdout)
    return 0
