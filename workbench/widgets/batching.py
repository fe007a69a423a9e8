"""The batching explorer: arrival rate, max batch size and max wait -> simulated dynamic batching.

The service model comes from profiler runs at a few batch sizes
(``workbench.batching.service_model_from_runs``), each setting's tables from
:func:`workbench.batching.simulator.batching_point` and its figures from ``workbench.plots.batching``:
latency vs throughput over a range of rates (the current point marked), p99 vs max wait, and the
queueing breakdown. A rate at or above capacity warns: the queue grows without bound.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from ..batching import service_model_from_runs
from ..batching.capacity import sweep_record, sweep_service_runs
from ..batching.simulator import WAITS_MS, batching_point, service_noise
from ..errors import WorkbenchError
from ..plots.batching import batching_curves_figure, queueing_breakdown_figure, wait_time_figure
from ..plots.batching import add_measured
from ..record import META_FILE, Run, read_meta
from .controller import Controller
from .panes import FigurePane, MessageLine

__all__ = ["BatchingExplorer", "WAITS_MS"]


@dataclass(frozen=True)
class Simulation:
    """Where the sliders start (``rate_rps``: half the capacity at ``max_batch_size``, the model's
    largest, by default) and the simulated requests per setting (seeded): the explorer's keywords."""

    rate_rps: float | None = None
    max_batch_size: int | None = None
    max_wait_ms: float = 5.0
    requests: int = 5_000
    seed: int = 0


class BatchingExplorer(Controller):
    """Sliders for the batcher -> simulated latency, throughput and queueing.

    service_runs: profiler runs (``Run`` objects or run folders) of one pipeline at one or more
        batch sizes; or pass ``model`` (a ``ServiceModel``).
    sweep: a ``load --sweep`` folder (or its record): its measured p99/p50 drawn beside the simulated
        curve; an in-process sweep's point runs are the service runs when none are given.
    simulation: the fields of :class:`Simulation` (``rate_rps=``, ``max_wait_ms=``, ``seed=``...).
    """

    def __init__(
        self,
        service_runs: Iterable[Any] | None = None,
        *,
        model=None,
        sla_ms: float | None = None,
        sweep: Any = None,
        debounce_s: float = 0.2,
        cache_size: int = 32,
        start: bool = True,
        **simulation: Any,
    ):
        first = Simulation(**simulation)
        self.sweep = sweep_record(sweep) if sweep is not None else None
        service_runs, model = _service(service_runs, model, sweep, self.sweep)
        if sla_ms is None and self.sweep is not None:
            sla_ms = self.sweep["plan"]["sla_ms"]
        super().__init__(debounce_s=debounce_s, cache_size=cache_size)
        self.trust_line = MessageLine()  # the noise of the runs the service times come from
        self.trust_line.show(*_service_trust(service_runs))
        self.model = model
        self.requests, self.sla_ms, self.seed = first.requests, sla_ms, first.seed
        self.simulations = 0
        self._build_sliders(first)
        self.controls = dict(rate_rps=self.rate, max_batch_size=self.max_batch_size)
        self.controls["max_wait_ms"] = self.max_wait
        self.panes = {name: FigurePane() for name in ("curves", "wait", "breakdown")}
        sliders = widgets.HBox(
            list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap")
        )
        self.view = widgets.VBox(
            [sliders, self.status, self.message_line.view, self.trust_line.view]
            + [pane.view for pane in self.panes.values()],
            layout=widgets.Layout(width="100%"),
        )
        self._react(self.refresh, *self.controls.values())
        if start:
            self.refresh()

    def _build_sliders(self, first: Simulation) -> None:
        """Rate (up to 1.2x the capacity at the largest batch), max batch size and max wait."""
        model, w = self.model, widgets
        largest = model.sizes[-1]
        size = first.max_batch_size or largest
        top = model.capacity_rps(largest) * 1.2
        rate = first.rate_rps if first.rate_rps is not None else 0.5 * model.capacity_rps(size)
        slider = dict(continuous_update=False, style={"description_width": "100px"})
        self.rate = w.FloatSlider(
            value=rate,
            min=top / 200,
            max=max(top, rate),
            step=top / 200,
            description="rate req/s",
            readout_format=".4g",
            layout=w.Layout(width="420px"),
            **slider,
        )
        self.max_batch_size = w.IntSlider(
            value=size, min=1, max=largest, description="max batch", **slider
        )
        self.max_wait = w.FloatSlider(
            value=first.max_wait_ms,
            min=0.0,
            max=max(WAITS_MS[-1], first.max_wait_ms),
            step=0.5,
            description="max wait ms",
            **slider,
        )

    @property
    def key(self) -> tuple[float, int, float]:
        return (
            round(float(self.rate.value), 6),
            int(self.max_batch_size.value),
            round(float(self.max_wait.value), 6),
        )

    def wait(self, timeout: float = 120.0) -> "BatchingExplorer":
        return super().wait(timeout)

    def failed(self, key, exc: WorkbenchError) -> None:
        self.status.value = "not simulated"
        self.message_line.show(str(exc), "error")

    def _figures(self, rate: float, size: int, wait_ms: float) -> dict[str, Any]:
        """Worker thread: the tables of this setting (``batching_point``) drawn by ``workbench.plots``."""
        point = batching_point(
            self.model, rate, size, wait_ms, requests=self.requests, seed=self.seed
        )
        self.simulations += point["simulations"]
        summary, e2e = point["summary"], point["summary"]["end_to_end"]
        curves = batching_curves_figure(point["curve"], sla_ms=self.sla_ms)
        curves.add_scatter(
            x=[summary["throughput_rps"]],
            y=[e2e["p99_ms"]],
            mode="markers",
            name="this setting (p99)",
            marker=dict(symbol="star", size=16, color="#d62728"),
        )
        if self.sweep is not None:
            add_measured(curves, self.sweep)
        return {
            "curves": curves,
            "wait": wait_time_figure(point["waits"], rate_rps=rate),
            "breakdown": queueing_breakdown_figure(summary, at=point["at"]),
            "stable": point["stable"],
            "capacity_rps": point["capacity_rps"],
            "summary": summary,
            "line": (
                f"capacity {point['capacity_rps']:,.4g} req/s at max batch {size}; {summary['requests']:,} "
                f"simulated requests: p50 {e2e['p50_ms']:.3g} ms, p99 {e2e['p99_ms']:.3g} ms, throughput "
                f"{summary['throughput_rps']:,.4g} req/s, mean batch {summary['mean_batch_size']:.3g}"
            ),
        }

    def draw(self, result: dict[str, Any]) -> None:
        for name, pane in self.panes.items():
            pane.show(result[name])
        self.status.value = result["line"]
        if result["stable"]:
            self.message_line.clear()
            return
        rate, size, _ = self.key
        self.message_line.show(
            f"unstable queue: {rate:,.4g} req/s is at or above the capacity of {result['capacity_rps']:,.4g} req/s "
            f"at max batch {size} (full batches back to back); the queue grows without bound, so these "
            "latencies only describe a finite run. Lower the rate or raise the max batch size.",
            "warning",
        )


def _service(service_runs: Any, model: Any, sweep: Any, record: dict | None) -> tuple[Any, Any]:
    """The service runs ([] for a model given alone) and the service model built from them."""
    if model is None and service_runs is None and record is not None:
        service_runs = sweep_service_runs(sweep, record)
    if model is None:
        if service_runs is None:
            raise WorkbenchError(
                "BatchingExplorer needs service_runs (profiler run folders) or model=ServiceModel"
            )
        service_runs = list(service_runs)
        model = service_model_from_runs(service_runs)
    return (service_runs if service_runs is not None else []), model


def _service_trust(service_runs: list[Any]) -> tuple[str, str]:
    """(text, level) of the trust line: the service runs' noise flags (``batching.simulator.service_noise``)."""
    metas = [
        (item.label, item.meta)
        if isinstance(item, Run)
        else (Path(item).name, read_meta(Path(item) / META_FILE))
        for item in service_runs
    ]
    if not metas:
        return "", "info"
    noise = service_noise(metas)
    if noise["noisy"]:
        runs = "; ".join(f"{label}: {', '.join(reasons)}" for label, reasons in noise["noisy"])
        return (
            f"service times from noisy runs ({runs}): the simulated latencies carry that noise; "
            "profile them again on a quiet machine or with --threads 1"
        ), "warning"
    if noise["unknown"]:
        return (
            f"service times from {len(metas)} runs; noise not recorded for {noise['unknown']} of them "
            "(made before noise was measured)"
        ), "info"
    return f"service times from {len(metas)} runs, all measured on a quiet machine", "info"
