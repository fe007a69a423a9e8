"""What the latency explorer keeps of a run: a small summary, not the run.

A :class:`RunView` holds the stage summary, the per-request durations the distribution needs and
the flame figure, so caching many of them costs little memory; the trace file is read once and
never kept. A live run's flame figure is built at once (its scratch trace is deleted next); a
recorded run's, whose trace stays on disk, when first asked for (:class:`Lazy`: the flame pane
opened), which keeps trace reading off a recorded configuration change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..analysis.budget import stage_summary
from ..analysis.waits import wait_flames, wait_summary
from ..analysis.failures import failure_summary
from ..record import Run
from ..record.meta import profile_part

Key = tuple[str, str, int, str, "int | None"]  # (pipeline, device, batch_size, precision, threads)


class Lazy:
    """A value built by ``build()`` on the first :meth:`get`, once (thread-safe); ``Lazy.ready(v)`` is built."""

    def __init__(self, build: Callable[[], Any]):
        self._build: Callable[[], Any] | None = build
        self._value: Any = None
        self._lock = threading.Lock()

    @classmethod
    def ready(cls, value: Any) -> "Lazy":
        made = cls(lambda: value)
        made.get()
        return made

    def get(self) -> Any:
        with self._lock:
            if self._build is not None:
                self._value, self._build = self._build(), None
            return self._value


REQUEST_KEEP = ["request", "warmup", "ok", "dur_ns"]
STAGE_KEEP = ["request", "stage", "dur_ns"]


@dataclass(frozen=True, eq=False)
class RunView:
    """A cached, display-ready summary of one run (hashed by identity: a re-measured run is a new view).

    flame: a :class:`Lazy` of the traced run's flame figure (``flame.get()``: None without a trace).
    source: where it came from, for the status line.
    """

    key: Key
    label: str
    source: str
    stage_order: list[str]
    summary: pd.DataFrame
    requests: pd.DataFrame
    stages: pd.DataFrame
    flame: Lazy
    failed: int
    # ``run.meta.noise`` as an object, shown as a badge ({noisy, reasons, fix}); None: not recorded
    noise: dict | None = None
    failures: dict | None = None  # ``analysis.failures.failure_summary`` of the measured requests
    notes: tuple = ()  # what a recorded run differs in from the configuration it stands in for
    stacks: dict | None = None  # ``run.meta.stacks`` (sampled stacks, slow against median)
    waits: dict | None = None  # ``analysis.waits.wait_summary`` of ``run.meta.sampled``
    wait_flames: dict | None = None  # ``analysis.waits.wait_flames``: work beside waits
    recorded: bool = False  # a recorded run (``data/runs``), not measured here
    # a live run's recording of the same configuration ("measure here" on a recorded one), shown beside it
    reference: "RunView | None" = None
    # where it was measured: the GPU's name, else the CPU model (None: unknown)
    machine: str | None = None

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
    """A RunView of ``run``; ``flame_builder(trace_path)`` makes the flame figure when there is a trace.

    lazy_flame: build it when first asked for (a recorded run, whose trace file stays), not now.
    """
    order = run.stage_names
    summary = stage_summary(run)
    requests = run.requests[REQUEST_KEEP].copy()
    stages = run.stages[STAGE_KEEP].copy()
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
    flame = Lazy.ready(None)
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


def discard_trace(run: Run) -> None:
    """Delete the scratch trace folder of an unsaved ``run`` (the run owns it; a saved run is untouched)."""
    run.close()
