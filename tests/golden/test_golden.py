"""Golden outputs: today's ``show --json`` / ``analyze --json`` still hold every frozen key and value.

The files were frozen by ``scripts/golden.py`` before the record refactor.
Keys added since (new report sections) are allowed; a frozen key that is gone
or whose value changed fails, naming the key path. Floats compare with a
relative tolerance of 1e-9 (they are printed from float64 arithmetic).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.conftest import load_script

REPO = Path(__file__).resolve().parents[2]
golden = load_script(REPO / "scripts" / "golden.py", "golden_script")

REL_TOL = 1e-9


def differences(frozen, now, where: str = "$") -> list[str]:
    """Each place where ``now`` lacks or changes a value of ``frozen`` (extra keys in ``now`` allowed)."""
    if isinstance(frozen, dict):
        if not isinstance(now, dict):
            return [f"{where}: was an object, now {type(now).__name__}"]
        out = []
        for key, value in frozen.items():
            if key not in now:
                out.append(f"{where}.{key}: missing")
            else:
                out += differences(value, now[key], f"{where}.{key}")
        return out
    if isinstance(frozen, list):
        if not isinstance(now, list) or len(now) != len(frozen):
            return [f"{where}: list of {len(frozen)} became {now!r:.80}"]
        return [
            d
            for i, (a, b) in enumerate(zip(frozen, now))
            for d in differences(a, b, f"{where}[{i}]")
        ]
    if isinstance(frozen, float) and isinstance(now, (int, float)) and not isinstance(now, bool):
        return (
            []
            if math.isclose(frozen, now, rel_tol=REL_TOL, abs_tol=1e-12)
            else [f"{where}: {frozen!r} -> {now!r}"]
        )
    if type(frozen) is not type(now) or frozen != now:
        return [f"{where}: {frozen!r:.80} -> {now!r:.80}"]
    return []


def test_differences_reports_changed_and_missing_keys_and_allows_new_ones():
    frozen = {"a": 1.0, "b": {"c": [1, 2]}, "d": "x"}
    assert differences(frozen, {"a": 1.0 + 1e-12, "b": {"c": [1, 2]}, "d": "x", "new": 5}) == []
    assert differences(frozen, {"a": 1.1, "b": {"c": [1, 3]}}) == [
        "$.a: 1.0 -> 1.1",
        "$.b.c[1]: 2 -> 3",
        "$.d: missing",
    ]


CASES = golden.cases()


@pytest.mark.parametrize(
    "argv,frozen_file", [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_output_keeps_every_golden_value(argv, frozen_file):
    if not frozen_file.is_file():
        pytest.skip(f"no golden file {frozen_file.name} (run scripts/golden.py)")
    frozen = json.loads(frozen_file.read_text())
    assert differences(frozen, golden.cli_json(argv)) == []
