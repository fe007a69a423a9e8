"""The solutions answer the exercise their notebook asks, and their sentences agree with the numbers beside them.

``test_notebooks.py`` executes every solution top to bottom; the slow tests here read
the executed solution's stdout (as ``test_claims.py`` reads the notebooks'), the fast
ones compare a solution's code with its notebook's.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from nbexec import NOTEBOOKS, SOLUTIONS
from test_claims import NUM, claim, claims, stdout


def solution(number: str):
    return next(p for p in SOLUTIONS if p.name.startswith(number))


def cli_flags(path, command: str) -> dict[str, str]:
    """The flags of the ``python -m workbench COMMAND`` argument list in a notebook's code (literal values only)."""
    code = "\n".join(
        c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
    )
    call = re.search(rf'"-m", "workbench", "{command}",(.*?)\]', code, flags=re.S)
    assert call, f"{path.name} runs no workbench {command}"
    words = [
        quoted or expr.strip()
        for quoted, expr in re.findall(r'"([^"]*)"|(\w[\w.()/ "]*)', call.group(1))
    ]
    return {w: words[i + 1] for i, w in enumerate(words) if w.startswith("--")}


def test_09_exercise_1_repeats_the_notebooks_server_and_load():
    """Exercise 1 compares the notebook's served run (2 ms wait, 3 s of load) with its client run: the solution's
    fresh server and load take the notebook's flags, not the server's defaults (5 ms)."""
    notebook = next(p for p in NOTEBOOKS if p.name.startswith("09"))
    for command in ("serve", "load"):
        assert cli_flags(solution("09"), command) == cli_flags(notebook, command), command


@pytest.mark.slow
def test_03_exercise_1_never_prints_a_move_between_equal_numbers(executed):
    text = stdout(executed(solution("03")))
    m = claim(text, r"^(\d+) warm-up requests kept apart; mixed in, (.*)\.$")
    parts = re.findall(
        rf"the (mean|p99) (?:moves {NUM} -> {NUM} ms|stays at {NUM} ms) \(([+-]\d+\.\d+) us\)",
        m.group(2),
    )
    assert [p[0] for p in parts] == ["mean", "p99"], m.group(0)
    for _, before, after, stays, delta_us in parts:
        if stays:
            assert abs(float(delta_us)) < 1, m.group(0)  # both in one printed 0.001 ms step
        else:
            assert before != after and float(after) - float(before) == pytest.approx(
                float(delta_us) / 1000, abs=6e-4
            )


@pytest.mark.slow
def test_07_exercise_1_names_the_largest_growth_of_the_shares_it_prints(executed):
    text = stdout(executed(solution("07")))
    pair = rf"([\w:]+) {NUM}% -> {NUM}%"
    grown = re.findall(
        pair,
        claim(text, r"^shares of operator self time that grow from batch 32 to 256: (.*)$").group(
            1
        ),
    )
    shrunk = re.findall(pair, claim(text, r"^shares that shrink: (.*)$").group(1))
    assert grown and all(float(b) >= float(a) for _, a, b in grown), grown
    assert all(float(b) <= float(a) for _, a, b in shrunk), shrunk
    m = claim(text, rf"^the share that grows most: ([\w:]+) \(\+{NUM}%\)")
    assert m.group(1) == grown[0][0] and {n for n, *_ in grown}.isdisjoint(n for n, *_ in shrunk), (
        m.group(0)
    )
    top = float(grown[0][2]) - float(grown[0][1])
    assert abs(top - float(m.group(2))) <= 0.11 and all(
        float(b) - float(a) <= top + 0.1 for _, a, b in grown
    )


@pytest.mark.slow
def test_08_exercise_2_reads_the_budgets_failures(executed):
    text = stdout(executed(solution("08")))
    errors = claim(text, r"^failed per stage: (\{.*\})$").group(1)
    m = claim(
        text,
        rf"^the budget's failures: postprocess (\d+) measured requests \({NUM}%\), ValueError: one request",
    )
    assert f"'postprocess': {m.group(1)}" in errors and int(m.group(1)) >= 1, (m.group(0), errors)
    assert len(claims(text, r"^the budget's failures: ")) == 1  # only postprocess raises
    assert "failures are left out." in text


@pytest.mark.slow
def test_09_exercise_2_explains_misses_by_first_requests_not_eviction(executed):
    """The LRU holds 10,000 responses for 500 keys: it never evicts, and the model of first requests alone
    predicts the measured hit rate (the stream of keys is seeded)."""
    text = stdout(executed(solution("09")))
    rates = [
        (float(m.group(2)), float(m.group(3)))
        for m in claims(
            text,
            rf"^zipf_s=(1\.1|0\.5): hit rate {NUM}% \(a cache missing only each key's first request: {NUM}%\)",
        )
    ]
    assert len(rates) == 2 and all(abs(measured - model) <= 5 for measured, model in rates), rates
    assert "evict" not in text.replace("never evicts", "")
