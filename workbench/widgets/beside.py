"""The latency explorer's run beside the runs it is read against: its recording, A, the one before it.

A live run on a shared server read against a quiet recording can reverse a verdict. So beside the
run on screen (``now``) stay the recorded run of the same configuration when ``now`` was measured
live (``recorded``), the pinned configuration A (``pinned``) and the one shown before
(``before``), each with its end-to-end p50, p99 and the p99's 95 % order-statistic interval, with
a word on whether ``now`` can be read against each: runs from two machines are not comparable, a
run flagged noisy (:mod:`workbench.noise`) is not comparable with a quiet one, and a p99 whose
interval the sample does not bound cannot be compared at all.

No widget here: the explorer draws the table (:func:`beside_table`), its figure
(``plots.compare_figures.beside_figure``) and the line of :func:`comparability`.
"""

from __future__ import annotations

import html

import pandas as pd

from ..analysis.stats import requests_to_bound
from .latency_support import describe
from .summaries import RunView

ROLES = ("now", "recorded", "pinned", "before")
COLUMNS = [
    "role",
    "configuration",
    "source",
    "count",
    "p50_ms",
    "p99_ms",
    "p99_ci_low_ms",
    "p99_ci_high_ms",
    "noisy",
    "machine",
    "compared_with_now",
]
BUSY = "measured on a busy machine"


def beside_table(now: RunView, others: dict[str, RunView | None]) -> pd.DataFrame:
    """One row per run, ``now`` first, then ``others`` in :data:`ROLES` order (None and repeats left out).

    Out: :data:`COLUMNS`; ``source`` is ``recorded`` or ``live``, ``count`` the successful
    measured requests, times in ms of end to end (``p99_ci_high_ms`` None where the sample
    does not bound it), ``noisy`` True/False/None (not measured), ``compared_with_now``
    the words of :func:`comparability` ("" on the ``now`` row).
    """
    rows = [_row("now", now)]
    seen = {(now.key, now.source)}
    for role in ROLES[1:]:
        view = others.get(role)
        if view is None or (view.key, view.source) in seen:
            continue
        seen.add((view.key, view.source))
        rows.append(_row(role, view))
    for row in rows[1:]:
        row["compared_with_now"] = comparability(rows[0], row)
    return pd.DataFrame(rows, columns=COLUMNS, dtype=object)  # None stays None (not NaN)


def _row(role: str, view: RunView) -> dict:
    e2e = view.summary.set_index("name").loc["end_to_end"]
    return {
        "role": role,
        "configuration": describe(view.key),
        "source": "recorded" if view.recorded else "live",
        "count": int(e2e["count"]),
        "p50_ms": _number(e2e["p50_ms"]),
        "p99_ms": _number(e2e["p99_ms"]),
        "p99_ci_low_ms": _number(e2e["p99_ci_low_ms"]),
        "p99_ci_high_ms": _number(e2e["p99_ci_high_ms"]),
        "noisy": (view.noise or {}).get("noisy"),
        "machine": view.machine,
        "compared_with_now": "",
    }


def _number(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def comparability(now: dict, other: dict) -> str:
    """Whether ``now`` (a :func:`beside_table` row) can be read against ``other``, in a student's words.

    ``this live run was measured on a busy machine: not comparable with the recording``; where
    both are quiet, what their p99 intervals say.
    """
    this = f"this {now['source']} run"
    that = _name(other)
    here, there = now.get("machine"), other.get("machine")
    if here and there and here != there:  # a recorded grid can span machines: say so first
        return f"{this} ({here}) and {that} ({there}) ran on different machines: not comparable"
    if now["noisy"] and other["noisy"]:
        return f"both {this} and {that} were {BUSY}: neither says what the change did"
    if now["noisy"]:
        return f"{this} was {BUSY}: not comparable with {that}"
    if other["noisy"]:
        return f"{that} was {BUSY}: not comparable with {this}"
    unknown = [name for name, row in ((this, now), (that, other)) if row["noisy"] is None]
    caveat = f" ({' and '.join(unknown)}: machine noise not measured)" if unknown else ""
    return _intervals(now, other) + caveat


def _name(row: dict) -> str:
    """``the recording``, ``the recording before it``, ``A, the pinned live run``, ..."""
    kind = "recording" if row["source"] == "recorded" else "live run"
    return {"recorded": "the recording", "before": f"the {kind} before it"}.get(
        row["role"], f"A, the pinned {kind}"
    )


def _intervals(now: dict, other: dict) -> str:
    """What two quiet runs' p99 intervals say: apart (a ratio), overlapping, or not bounded."""
    short = [row for row in (now, other) if row["p99_ci_high_ms"] is None]
    if short:
        counts = " and ".join(str(row["count"]) for row in short)
        return (
            f"p99 of {counts} requests is not bounded by its sample "
            f"({requests_to_bound(99)} bound it): too few requests to compare p99"
        )
    if (
        now["p99_ci_high_ms"] < other["p99_ci_low_ms"]
        or now["p99_ci_low_ms"] > other["p99_ci_high_ms"]
    ):
        ratio = now["p99_ms"] / other["p99_ms"]
        return f"p99 {ratio:.2f}x {_name(other)}'s, the 95 % intervals apart"
    return "p99 intervals overlap: no difference shown between these two"


def beside_html(table: pd.DataFrame) -> str:
    """The table as a small HTML table for the page (ms with 3 decimals; an unbounded end says so)."""
    head = "".join(
        f"<th>{h}</th>"
        for h in ("", "configuration", "source", "n", "p50 ms", "p99 ms [95 % CI]", "")
    )
    body = []
    for row in table.to_dict("records"):
        high = "not bounded" if row["p99_ci_high_ms"] is None else f"{row['p99_ci_high_ms']:.3f}"
        low = "not bounded" if row["p99_ci_low_ms"] is None else f"{row['p99_ci_low_ms']:.3f}"
        noise = {True: "busy machine", False: "quiet", None: "noise not measured"}[row["noisy"]]
        cells = (
            row["role"],
            row["configuration"],
            f"{row['source']}, {noise}",
            row["count"],
            f"{row['p50_ms']:.3f}",
            f"{row['p99_ms']:.3f} [{low}, {high}]",
            row["compared_with_now"],
        )
        body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return f'<table style="font-size:90%"><tr>{head}</tr>{"".join(body)}</table>'
