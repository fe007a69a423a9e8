"""The batching explorer: arrival rate, max batch size and max wait -> simulated dynamic batching.

The service model comes from profiler runs at a few batch sizes
(``workbench.batching.service_model_from_runs``); every setting is simulated
with ``workbench.batching`` on a seeded Poisson schedule, so moving back to a
setting draws the same figures (from the LRU cache, without simulating). Three
figures: latency vs throughput over a range of arrival rates at the current
batch settings (the current point marked), p99 vs max wait at the current rate,
and the queueing breakdown (batch wait, queue wait, service) of the current
point. A rate at or above capacity shows a warning: the queue grows without
bound and the figures are those of a finite run.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import ipywidgets as widgets

from ..errors import WorkbenchError
from .cache import LRUCache
from .jobs import JobQueue
from .panes import FigurePane, MessageLine

WAITS_MS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
RATE_FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 0.95)


class BatchingExplorer:
    """Sliders for the batcher -> simulated latency, throughput and queueing.

    service_runs: profiler runs (``Run`` objects or run folders) of one pipeline
        at one or more batch sizes; or pass ``model`` (a ``ServiceModel``).
    requests: simulated requests per setting (a seeded Poisson schedule).
    sla_ms: draws the target on the latency-vs-throughput figure.
    """

    def __init__(self, service_runs: Iterable[Any] | None = None, *, model=None, rate_rps: float | None = None,
                 max_batch_size: int | None = None, max_wait_ms: float = 5.0, requests: int = 5_000,
                 sla_ms: float | None = None, seed: int = 0, debounce_s: float = 0.2, cache_size: int = 32,
                 start: bool = True):
        from ..batching import service_model_from_runs

        if model is None:
            if service_runs is None:
                raise WorkbenchError("BatchingExplorer needs service_runs (profiler run folders) or model=ServiceModel")
            model = service_model_from_runs(service_runs)
        self.model = model
        self.requests, self.sla_ms, self.seed = requests, sla_ms, seed
        self.cache = LRUCache(cache_size)
        self.simulations = 0
        self.last_error: BaseException | None = None
        self.jobs = JobQueue(debounce_s, on_error=self._unexpected)
        self._lock = threading.RLock()
        largest = model.sizes[-1]
        size = max_batch_size or largest
        top = model.capacity_rps(largest) * 1.2
        rate = rate_rps if rate_rps is not None else 0.5 * model.capacity_rps(size)
        w = widgets
        self.rate = w.FloatSlider(value=rate, min=top / 200, max=max(top, rate), step=top / 200, description="rate req/s",
                                  continuous_update=False, readout_format=".4g", style={"description_width": "100px"},
                                  layout=w.Layout(width="420px"))
        self.max_batch_size = w.IntSlider(value=size, min=1, max=largest, description="max batch",
                                          continuous_update=False, style={"description_width": "100px"})
        self.max_wait = w.FloatSlider(value=max_wait_ms, min=0.0, max=max(WAITS_MS[-1], max_wait_ms), step=0.5,
                                      description="max wait ms", continuous_update=False,
                                      style={"description_width": "100px"})
        self.status = w.Label(value="")
        self.message_line = MessageLine()
        self.panes = {name: FigurePane() for name in ("curves", "wait", "breakdown")}
        self.view = w.VBox([
            w.HBox([self.rate, self.max_batch_size, self.max_wait], layout=w.Layout(flex_flow="row wrap")),
            self.status, self.message_line.view,
            self.panes["curves"].view, self.panes["wait"].view, self.panes["breakdown"].view,
        ], layout=w.Layout(width="100%"))
        for control in (self.rate, self.max_batch_size, self.max_wait):
            control.observe(lambda _c: self.refresh(), "value")
        if start:
            self.refresh()

    @property
    def key(self) -> tuple[float, int, float]:
        return (round(float(self.rate.value), 6), int(self.max_batch_size.value), round(float(self.max_wait.value), 6))

    @property
    def message(self) -> str:
        return self.message_line.text

    def set(self, *, rate_rps: float | None = None, max_batch_size: int | None = None,
            max_wait_ms: float | None = None) -> "BatchingExplorer":
        """Move the sliders as a user would."""
        for control, value in ((self.rate, rate_rps), (self.max_batch_size, max_batch_size), (self.max_wait, max_wait_ms)):
            if value is not None:
                control.value = value
        return self

    def wait(self, timeout: float = 120.0) -> "BatchingExplorer":
        self.jobs.wait(timeout)
        return self

    def refresh(self) -> None:
        key = self.key
        result = self.cache.get(key)
        if result is not None:
            self.jobs.cancel()
            self._draw(result)
            return
        self.status.value = "simulating..."
        self.jobs.submit(lambda cancel: self._simulate(key))

    def _repr_mimebundle_(self, **kwargs):
        return self.view._repr_mimebundle_(**kwargs)

    def _simulate(self, key: tuple[float, int, float]) -> None:
        try:
            result = self._figures(*key)
        except WorkbenchError as exc:
            self.status.value = "not simulated"
            self.message_line.show(str(exc), "error")
            return
        self.cache.put(key, result)
        if key == self.key:
            self._draw(result)

    def _figures(self, rate: float, size: int, wait_ms: float) -> dict[str, Any]:
        """Simulate the point and the two sweeps around it; the figures and a summary line."""
        from ..batching import Arrivals, BatchPolicy, load_summary, simulate, sweep
        from ..plots.batching import batching_curves_figure, queueing_breakdown_figure, wait_time_figure

        policy = BatchPolicy(size, wait_ms)
        sim = simulate(self.model, Arrivals("poisson", rate_rps=rate, count=self.requests, seed=self.seed), policy,
                       seed=self.seed)
        summary = load_summary(sim.requests)
        capacity = sim.capacity_rps
        rates = sorted({*(f * capacity for f in RATE_FRACTIONS), rate})
        curve = sweep(self.model, rates, [size], [wait_ms], requests=self.requests, seed=self.seed)
        waits = sweep(self.model, [rate], [size], sorted({*WAITS_MS, wait_ms}), requests=self.requests, seed=self.seed)
        self.simulations += 1 + len(rates) + len(waits)
        curves = batching_curves_figure(curve, sla_ms=self.sla_ms)
        e2e = summary["end_to_end"]
        curves.add_scatter(x=[summary["throughput_rps"]], y=[e2e["p99_ms"]], mode="markers", name="this setting (p99)",
                           marker=dict(symbol="star", size=16, color="#d62728"))
        return {
            "curves": curves,
            "wait": wait_time_figure(waits, rate_rps=rate),
            "breakdown": queueing_breakdown_figure(summary),
            "stable": bool(sim.stable), "capacity_rps": capacity, "summary": summary,
            "line": (f"capacity {capacity:,.4g} req/s at max batch {size}; {summary['requests']:,} simulated requests: "
                     f"p50 {e2e['p50_ms']:.3g} ms, p99 {e2e['p99_ms']:.3g} ms, throughput "
                     f"{summary['throughput_rps']:,.4g} req/s, mean batch {summary['mean_batch_size']:.3g}"),
        }

    def _draw(self, result: dict[str, Any]) -> None:
        with self._lock:
            for name, pane in self.panes.items():
                pane.show(result[name])
            self.status.value = result["line"]
            if result["stable"]:
                self.message_line.clear()
            else:
                rate, size, _ = self.key
                self.message_line.show(
                    f"unstable queue: {rate:,.4g} req/s is at or above the capacity of {result['capacity_rps']:,.4g} req/s "
                    f"at max batch {size} (full batches back to back); the queue grows without bound, so these "
                    "latencies only describe a finite run. Lower the rate or raise the max batch size.", "warning")

    def _unexpected(self, exc: BaseException) -> None:
        self.last_error = exc
        self.message_line.show(f"unexpected {type(exc).__name__}: {exc}", "error")

