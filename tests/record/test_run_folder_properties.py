"""Property: any mutation of a real run folder gives ``show --json`` exit 0 with strict JSON or exit 2 with one line.

Bounded here (``make test``); ``benchmarks/fuzz_inputs.py`` runs the same mutators at length.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.input_fuzz import BASE_RUN, judge, mutate_run_folder, run_cli


def show_mutated(
    rnd: random.Random, command: tuple[str, ...] = ("show", "--json")
) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(shutil.copytree(BASE_RUN, Path(tmp) / "run"))
        mutate_run_folder(root, rnd)
        rc, out, err = run_cli([*command, str(root)])
        return judge(rc, out, err)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_a_mutated_run_folder_is_a_budget_or_one_line(rnd):
    outcome, why = show_mutated(rnd)
    assert outcome != "crash", why


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_a_mutated_run_folder_through_audit(rnd):
    outcome, why = show_mutated(rnd, ("audit", "--json"))
    assert outcome != "crash", why


def test_the_mutators_reach_both_outcomes():
    outcomes = {show_mutated(random.Random(seed))[0] for seed in range(30)}
    assert outcomes == {"ok", "clean_error"}
