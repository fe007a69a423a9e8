"""The generative explorer: continuous batching's knobs -> simulated TTFT, ITL and goodput, with live points.

Step models and request lengths come from recorded continuous ``load`` runs
(``batching.generative_explore.recorded_setup``), each setting's curve from ``simulated_curve`` and
its figure from ``plots.generative_figure``, with the precision's recorded runs beside
it. A precision and policy's curve is cached apart, so moving the rate alone simulates one rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ipywidgets as widgets
import numpy as np

from ..batching.continuous import ContinuousPolicy
from ..batching.generative_explore import measured_points, recorded_setup, simulated_curve
from ..plots import generative_figure
from ..record import Run, load_run
from .controller import Controller, LRUCache
from .panes import FigurePane

RATES = 10  # simulated rates on the curve, from a tenth of the top rate to the top
CACHE_SIZE = 32  # settings (and curves) kept: a move back to one of them answers at once


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
        self.view = widgets.VBox(
            [
                widgets.HBox(
                    list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap")
                )
            ]
            + [self.status, self.message_line.view, self.pane.view]
        )
        self._react(self.refresh, *self.controls.values())
        if start:
            self.refresh()

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

    def draw(self, result: dict) -> None:
        self.pane.show(result["figure"])
        self.status.value = result["line"]
        self.message_line.clear()
