"""What the latency explorer keeps of a run (:class:`RunView`, a small summary, not the run), and
the runs it is read against (:func:`beside_table`: a live run on a shared server read against a
quiet recording can reverse a verdict); no widget.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..analysis.budget import failure_summary, stage_summary
from ..analysis.waits import wait_flames, wait_summary
from ..analysis.stats import requests_to_bound
from ..record import Run
from ..record.meta import profile_part

Key = tuple[str, str, int, str, "int | None"]  # (pipeline, device, batch_size, precision, threads)


class Lazy:
    """A value built by ``build()`` on the first :meth:`get`, once (thread-safe)."""

    def __init__(self, build: Callable[[], Any]):
        self._build: Callable[[], Any] | None = build
        self._value: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._build is not None:
                self._value, self._build = self._build(), None
            return self._value


@dataclass(frozen=True, eq=False)
class RunView:
    """A cached, display-ready summary of one run (hashed by identity: a re-measured run is a new view);
    ``flame``: its flame figure, built on the first ``flame.get()`` (None without a trace)."""

    key: Key
    label: str
    source: str
    stage_order: list[str]
    summary: pd.DataFrame
    requests: pd.DataFrame
    stages: pd.DataFrame
    flame: Lazy
    failed: int
    noise: dict | None = None  # ``run.meta.noise`` ({noisy, reasons, fix}); None: not recorded
    failures: dict | None = None  # ``analysis.budget.failure_summary`` of the measured requests
    notes: tuple = ()  # what a recorded run differs in from the configuration it stands in for
    stacks: dict | None = None  # ``run.meta.stacks`` (sampled stacks, slow against median)
    waits: dict | None = None  # ``analysis.waits.wait_summary`` of ``run.meta.sampled``
    wait_flames: dict | None = None  # ``analysis.waits.wait_flames``: work beside waits
    recorded: bool = False  # a recorded run (``data/runs``), not measured here
    reference: "RunView | None" = None  # the recording beside a live run of its configuration
    machine: str | None = None  # where it was measured: the GPU's name, else the CPU model

    @property
    def wait_line(self) -> str | None:
        """The waits' headline (``record: 93 % of the slowest 1 % waiting on a lock at ...``), or None."""
        return (self.waits or {}).get("headline")

    @property
    def has_stacks(self) -> bool:
        return bool((self.stacks or {}).get("stages"))

    @property
    def has_wait_flames(self) -> bool:
        return bool(self.wait_flames and (self.wait_flames["work"] or self.wait_flames["waits"]))

    @property
    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
        """``(requests, stages, stage_order)``: the tables three of the figures read."""
        return self.requests, self.stages, self.stage_order


def summarize(
    run: Run, key: Key, source: str, flame_builder=None, *, lazy_flame: bool = False
) -> RunView:
    """A RunView of ``run``, its flame by ``flame_builder(trace_path)`` now or (``lazy_flame``) later."""
    order = run.stage_names
    summary = stage_summary(run)
    requests = run.requests[["request", "warmup", "ok", "dur_ns"]].copy()
    stages = run.stages[["request", "stage", "dur_ns"]].copy()
    measured = requests[~requests["warmup"]]
    meta = run.meta
    stacks = profile_part(meta).stacks
    sampled = (
        getattr(meta, "sampled", None),  # profile, load and served runs
        run.requests,
        run.stages,
        order,
        getattr(meta, "pipeline_stages", None),
    )
    flame = Lazy(lambda: None)
    if run.trace_path is not None and flame_builder is not None:
        path = run.trace_path
        flame = Lazy(lambda: flame_builder(path))
        if not lazy_flame:
            flame.get()
    return RunView(
        key=key,
        label=run.label,
        source=source,
        stage_order=order,
        summary=summary,
        requests=requests,
        stages=stages,
        flame=flame,
        failed=int((~measured["ok"]).sum()),
        noise=run.meta.noise.to_dict() if run.meta.noise else None,
        failures=failure_summary(run.requests, order),
        stacks=stacks if isinstance(stacks, dict) else None,
        waits=wait_summary(*sampled),
        wait_flames=wait_flames(*sampled),
        machine=run.meta.env.device_name or run.meta.env.cpu_model,
    )


def describe(key: Key) -> str:
    pipeline, device, batch_size, precision, threads = key
    return f"{pipeline} {device} bs={batch_size} {precision} threads={threads if threads is not None else 'default'}"


ROLES = ("now", "recorded", "pinned", "before")
BUSY = "measured on a busy machine"
E2E_MS = ("p50_ms", "p99_ms", "p99_ci_low_ms", "p99_ci_high_ms")  # None where the sample is short


def beside_table(now: RunView, others: dict[str, RunView | None]) -> pd.DataFrame:
    """One row per run (:func:`_row`), ``now`` first, then ``others`` in :data:`ROLES` order."""
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
    return pd.DataFrame(rows, dtype=object)  # None stays None (not NaN)


def _row(role: str, view: RunView) -> dict:
    e2e = view.summary.set_index("name").loc["end_to_end"]
    return {
        "role": role,
        "configuration": describe(view.key),
        "source": "recorded" if view.recorded else "live",
        "count": int(e2e["count"]),
        **{k: None if pd.isna(e2e[k]) else float(e2e[k]) for k in E2E_MS},
        "noisy": (view.noise or {}).get("noisy"),
        "machine": view.machine,
        "compared_with_now": "",
    }


def comparability(now: dict, other: dict) -> str:
    """Whether ``now`` (a :func:`beside_table` row) can be read against ``other``, in words."""
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
    # two quiet runs: what their p99 intervals say (apart: a ratio, overlapping, or not bounded)
    short = [row for row in (now, other) if row["p99_ci_high_ms"] is None]
    if short:
        counts = " and ".join(str(row["count"]) for row in short)
        return (
            f"p99 of {counts} requests is not bounded by its sample "
            f"({requests_to_bound(99)} bound it): too few requests to compare p99"
        ) + caveat
    if (
        now["p99_ci_high_ms"] < other["p99_ci_low_ms"]
        or now["p99_ci_low_ms"] > other["p99_ci_high_ms"]
    ):
        ratio = now["p99_ms"] / other["p99_ms"]
        return f"p99 {ratio:.2f}x {that}'s, the 95 % intervals apart" + caveat
    return "p99 intervals overlap: no difference shown between these two" + caveat


def _name(row: dict) -> str:
    """``the recording``, ``the recording before it``, ``A, the pinned live run``, ..."""
    kind = "recording" if row["source"] == "recorded" else "live run"
    return {"recorded": "the recording", "before": f"the {kind} before it"}.get(
        row["role"], f"A, the pinned {kind}"
    )


def beside_html(table: pd.DataFrame) -> str:
    """The table as a small HTML table for the page (ms with 3 decimals; an unbounded end says so)."""
    heads = ("", "configuration", "source", "n", "p50 ms", "p99 ms [95 % CI]", "")
    head = "".join(f"<th>{h}</th>" for h in heads)
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
