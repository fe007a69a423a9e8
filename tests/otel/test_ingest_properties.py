"""Property: any mutation of a real OTLP/JSON export gives exit 0/1 with strict JSON or exit 2 with one line.

Bounded here (``make test``); ``benchmarks/fuzz_inputs.py`` runs the same mutators at length.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.otel.test_ingest import go_export
from tests.support.input_fuzz import judge, mutated_otlp, run_cli

BASE = go_export()


def ingest_mutated(rnd: random.Random) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spans.jsonl"
        path.write_bytes(mutated_otlp(BASE, rnd))
        rc, out, err = run_cli(
            [
                "ingest-otel",
                str(path),
                "--out",
                str(Path(tmp) / "run"),
                "--json",
                "--stage-map",
                "db.query=db",
                "auth=auth",
            ]
        )
        return judge(rc, out, err)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_a_mutated_export_is_a_result_or_one_line(rnd):
    outcome, why = ingest_mutated(rnd)
    assert outcome != "crash", why


def test_the_mutators_reach_both_outcomes():
    outcomes = {ingest_mutated(random.Random(seed))[0] for seed in range(40)}
    assert outcomes == {"ok", "clean_error"}
