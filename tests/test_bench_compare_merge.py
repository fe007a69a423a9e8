"""benchmarks/bench_compare.py --merge: parts of a long benchmark joined, each arm recounted from its repetitions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import load_script

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench():
    return load_script(BENCHMARKS / "bench_compare.py", "bench_compare_under_test")


def rep(seed: int, verdict: str, decisive: list[str], ci: tuple[float, float]) -> dict:
    return {
        "seed": seed,
        "verdict": verdict,
        "p50_ratio": 1.0,
        "p50_ci": list(ci),
        "p50_a_ms": 1.0,
        "decisive": decisive,
    }


def part(
    tmp_path: Path,
    name: str,
    first_seed: int,
    verdicts: list[tuple],
    load: list[float],
    busy: bool,
    stage_us: float,
) -> Path:
    rows = []
    for factor in (1.0, 1.1):
        per_rep = [rep(first_seed + i, *v) for i, v in enumerate(verdicts)]
        rows.append(
            {
                "example": "image",
                "stage": "forward",
                "factor": factor,
                "reps": len(per_rep),
                "requests": 2400,
                "what": "w",
                "count": -1,
                "rate": -1.0,
                "wilson_95": [0, 0],
                "median_p50_ci_width": 0,
                "noisy_reps": 1,
                "stage_p50_us": stage_us,
                "scale_k": 1.01,
                "seconds": 10.0,
                "per_rep": per_rep,
            }
        )
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"rows": rows, "load_average": load, "busy_machine": busy}))
    return path


def test_parts_are_recounted_from_their_repetitions(bench, tmp_path):
    a = part(
        tmp_path,
        "a",
        0,
        [("slower", ["forward"], (1.0, 1.2)), ("no detectable difference", [], (0.9, 1.1))],
        [0.5, 0.9],
        False,
        3000.0,
    )
    b = part(
        tmp_path,
        "b",
        2,
        [
            ("slower", ["forward", "end to end"], (1.05, 1.15)),
            ("slower", [], (1.0, 1.3)),
            ("faster", ["parse"], (0.8, 0.9)),
        ],
        [0.9, 1.0],
        False,
        2900.0,
    )
    rows, load, busy = bench.merge([a, b])
    aa, ab = rows
    assert [r["seed"] for r in aa["per_rep"]] == [0, 1, 2, 3, 4]
    assert (aa["reps"], aa["count"], aa["rate"]) == (
        5,
        3,
        0.6,
    )  # A against A: any decisive verdict is a false alarm
    assert (ab["reps"], ab["count"], ab["rate"]) == (
        5,
        3,
        0.6,
    )  # 10 % slower: found when the stage says slower
    lo, hi = bench.wilson(3, 5)
    assert aa["wilson_95"] == [round(lo, 4), round(hi, 4)]
    assert aa["median_p50_ci_width"] == 0.2  # widths 0.2, 0.2, 0.1, 0.3, 0.1 -> sorted[2]
    assert (aa["noisy_reps"], aa["seconds"], aa["stage_p50_us"], aa["scale_k"]) == (
        2,
        20.0,
        [3000.0, 2900.0],
        [1.01, 1.01],
    )
    assert (load, busy) == ((0.5, 1.0), False)


def test_parts_that_repeat_seeds_are_refused(bench, tmp_path):
    a = part(tmp_path, "a", 0, [("slower", [], (1.0, 1.2))], [0.5, 0.9], False, 1.0)
    b = part(tmp_path, "b", 0, [("slower", [], (1.0, 1.2))], [0.5, 0.9], True, 1.0)
    with pytest.raises(
        SystemExit, match=r"--merge: \('image', 'forward', 1.0, 2400\) repeats seeds across parts"
    ):
        bench.merge([a, b])
