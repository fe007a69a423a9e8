"""The batching explorers: simulated dynamic (:class:`BatchingExplorer`, from profiler runs' service
times) and continuous batching (:class:`GenerativeExplorer`, from recorded continuous ``load`` runs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import numpy as np

from ..batching import service_model_from_runs
from ..batching.capacity import sweep_record, sweep_service_runs
from ..batching.continuous import ContinuousPolicy, measured_points, recorded_setup, simulated_curve
from ..batching.simulator import WAITS_MS, batching_point, service_noise
from ..errors import WorkbenchError
from ..plots.batching import batching_curves_figure, queueing_breakdown_figure, wait_time_figure
from ..plots.batching import add_measured
from ..plots import generative_figure
from ..record import META_FILE, Run, load_run, read_meta
from .controller import Controller, LRUCache
from .panes import FigurePane, MessageLine

RATES = 10  # the generative curve's simulated rates, from a tenth of the top rate to the top
CACHE_SIZE = 32  # settings (and curves) kept: a move back to one of them answers at once


@dataclass(frozen=True)
class Simulation:
    """The explorer's keywords: where the sliders start (``rate_rps``: half the capacity by default)."""

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

    not_run = "not simulated"

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
        self._simulator(self.trust_line, *self.panes.values(), start=start)

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
        rate, size, wait_ms = (c.value for c in self.controls.values())
        return round(float(rate), 6), int(size), round(float(wait_ms), 6)

    def wait(self, timeout: float = 120.0) -> "BatchingExplorer":
        return super().wait(timeout)

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
        super().draw(result)
        if result["stable"]:
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


class GenerativeExplorer(Controller):
    """Sliders for continuous batching -> simulated TTFT p99, ITL p99 and goodput against throughput.

    runs: continuous ``load`` runs (``Run`` objects or run folders) of one generative pipeline, at
        one or more precisions (those offered) and rates; ``ttft_ms``, ``tpot_ms``: goodput's bounds.
    top_rps: the highest rate simulated (default 2.5 times the highest recorded rate).
    """

    def __init__(
        self,
        runs: Iterable[Any],
        *,
        ttft_ms: float = 50.0,
        tpot_ms: float = 5.0,
        requests: int = 300,
        top_rps: float | None = None,
        seed: int = 0,
        debounce_s: float = 0.2,
        start: bool = True,
    ):
        super().__init__(debounce_s=debounce_s, cache_size=CACHE_SIZE)
        runs = [run if isinstance(run, Run) else load_run(run) for run in runs]
        self.setups = recorded_setup(runs)
        self.bounds = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms}
        self.measured = measured_points(runs, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
        self.requests, self.seed, self.simulations = requests, seed, 0
        self.curves = LRUCache(CACHE_SIZE)  # (precision, policy) -> the curve over self.rates
        top = top_rps or 2.5 * float(self.measured["rate_rps"].max())
        self.rates = np.linspace(top / RATES, top, RATES)
        shown = "fp32" if "fp32" in self.setups else next(iter(self.setups))
        first = self.measured[self.measured["precision"] == shown].iloc[-1]  # its highest rate
        self.precision = widgets.Dropdown(
            options=list(self.setups), value=shown, description="precision"
        )
        style = dict(continuous_update=False, style={"description_width": "130px"})
        self.max_num_seqs = widgets.IntSlider(
            value=int(first["max_num_seqs"]), min=1, max=32, description="max sequences", **style
        )
        self.max_batched_tokens = widgets.IntSlider(
            value=int(first["max_batched_tokens"]), min=32, max=1024, step=32,
            description="max batched tokens", **style,
        )  # fmt: skip
        self.chunk_tokens = widgets.IntSlider(
            value=int(first["chunk_tokens"] or 0), min=0, max=128, step=8,
            description="chunk tokens (0: whole)", **style,
        )  # fmt: skip
        self.rate = widgets.FloatSlider(
            value=float(first["rate_rps"]), min=self.rates[0], max=top, step=top / 100,
            description="rate req/s", readout_format=".4g", **style,
        )  # fmt: skip
        names = ("precision", "max_num_seqs", "max_batched_tokens", "chunk_tokens", "rate")
        self.controls = {name: getattr(self, name) for name in names}
        self.pane = FigurePane()
        self.panes = {"figure": self.pane}
        self._simulator(self.pane, start=start)

    @property
    def key(self) -> tuple:
        *values, rate = (c.value for c in self.controls.values())
        return (*values, round(float(rate), 6))

    def _figures(self, precision: str, seqs: int, tokens: int, chunk: int, rate: float) -> dict:
        """Worker thread: the curve and this setting's point, simulated, drawn beside the live runs."""
        setup, policy = self.setups[precision], ContinuousPolicy(seqs, tokens, chunk or None)
        run = dict(requests=self.requests, seed=self.seed, **self.bounds)
        curve = self.curves.get((precision, policy))
        if curve is None:
            curve = simulated_curve(setup, policy, self.rates, **run)
            self.curves.put((precision, policy), curve)
            self.simulations += len(self.rates)
        point = simulated_curve(setup, policy, [rate], **run).iloc[0].to_dict()
        self.simulations += 1
        live = self.measured[self.measured["precision"] == precision]
        figure = generative_figure(curve, measured=live, current=point, bounds=self.bounds)
        goodput = "none" if point["goodput"] is None else f"{point['goodput']:.0%}"
        line = (
            f"{precision}, {rate:.4g} req/s offered: {point['throughput_rps']:.4g} req/s, TTFT p99 "
            f"{point['ttft_p99_ms']:.3g} ms, ITL p99 {point['itl_p99_ms']:.3g} ms, goodput {goodput} "
            f"({self.requests} simulated requests; steps of {setup.run}; measured points: "
            f"max_num_seqs {int(live['max_num_seqs'].iloc[0])}, "
            f"max_batched_tokens {int(live['max_batched_tokens'].iloc[0])})"
        )
        return {"figure": figure, "curve": curve, "point": point, "line": line}
