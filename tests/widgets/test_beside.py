"""widgets.summaries.beside_table: whether the run on screen can be read against another, in a student's words."""

from __future__ import annotations

import pandas as pd

from workbench.widgets.summaries import beside_html, comparability


def row(role="now", source="live", noisy=False, count=600, p99=10.0, low=9.5, high=10.5) -> dict:
    return {
        "role": role,
        "configuration": "text cpu bs=8 bf16 threads=1",
        "source": source,
        "count": count,
        "p50_ms": 5.0,
        "p99_ms": p99,
        "p99_ci_low_ms": low,
        "p99_ci_high_ms": high,
        "noisy": noisy,
        "machine": None,
        "compared_with_now": "",
    }


RECORDING = row("recorded", "recorded")


def test_a_busy_run_on_either_side_is_not_comparable():
    assert comparability(row(noisy=True), RECORDING) == (
        "this live run was measured on a busy machine: not comparable with the recording"
    )
    assert comparability(row(source="recorded"), row("before", noisy=True)) == (
        "the live run before it was measured on a busy machine: not comparable with this recorded run"
    )
    assert comparability(row(noisy=True), row("pinned", noisy=True)) == (
        "both this live run and A, the pinned live run were measured on a busy machine: "
        "neither says what the change did"
    )


def test_quiet_runs_are_read_through_their_p99_intervals():
    apart = row(p99=4.4, low=4.2, high=4.6)
    assert comparability(apart, RECORDING) == (
        "p99 0.44x the recording's, the 95 % intervals apart"
    )
    assert comparability(row(p99=10.2, low=9.9, high=10.6), row("before", "recorded")) == (
        "p99 intervals overlap: no difference shown between these two"
    )
    assert comparability(row(count=20, high=None), RECORDING) == (
        "p99 of 20 requests is not bounded by its sample (563 bound it): too few requests to "
        "compare p99"
    )


def test_noise_not_measured_is_said_not_assumed():
    assert comparability(row(noisy=None, p99=4.4, low=4.2, high=4.6), RECORDING) == (
        "p99 0.44x the recording's, the 95 % intervals apart "
        "(this live run: machine noise not measured)"
    )


def test_the_html_table_says_an_unbounded_end_and_escapes_text():
    table = pd.DataFrame(
        [row(count=20, high=None, noisy=True) | {"configuration": "<mine> cpu"}, RECORDING],
        dtype=object,
    )
    page = beside_html(table)
    assert "<td>10.000 [9.500, not bounded]</td>" in page
    assert "<td>&lt;mine&gt; cpu</td>" in page and "<td>live, busy machine</td>" in page
    assert "<td>recorded, quiet</td>" in page and "<td>10.000 [9.500, 10.500]</td>" in page


def test_runs_from_two_machines_are_not_comparable_whatever_their_intervals():
    """The recorded grid spans machines (text fp32 on one CPU, bf16/int8 at batch 1-16 on another):
    a student reading one against the other is told so before any interval."""
    here = row(p99=4.4, low=4.2, high=4.6) | {"machine": "AMD EPYC"}
    there = RECORDING | {"machine": "Intel(R) Xeon(R) Processor"}
    assert comparability(here, there) == (
        "this live run (AMD EPYC) and the recording (Intel(R) Xeon(R) Processor) ran on different "
        "machines: not comparable"
    )
    assert comparability(here, RECORDING | {"machine": "AMD EPYC"}) == (
        "p99 0.44x the recording's, the 95 % intervals apart"
    )
    assert comparability(here, RECORDING).startswith("p99 0.44x")  # one machine unknown: intervals
