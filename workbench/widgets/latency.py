"""The latency explorer: sliders for batch size, precision, device and pipeline -> budget, distribution, flame.

Every control change goes through one path (:meth:`LatencyExplorer._changed`):
a configuration already seen (in the LRU cache, or a recorded run under
``runs``) is drawn at once on the calling thread; an unseen one is profiled on
the :class:`~workbench.widgets.jobs.JobQueue` worker, debounced, one run at a
time, with a progress bar and a cancel button. A configuration that cannot run
(``PrecisionError``, ``ConfigError``, a failing factory) shows its message in
the message line; the figures keep the last good run.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ..config import PRECISIONS, PipelineConfig
from ..device import available_devices
from ..errors import WorkbenchError
from .cache import LRUCache
from .figures import budget_view, distribution_view, empty_view, flame_from_trace
from .jobs import JobQueue
from .panes import FigurePane, MessageLine, figure_bundle
from .summaries import Key, RunView, discard_trace, index_runs, summarize

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
PROGRESS_EVERY_S = 0.1


class LatencyExplorer:
    """Controls -> a small profiling run -> latency budget, distribution and flame graph.

    example: an example name (``workbench.examples.EXAMPLES``) or a factory
        ``build(config) -> Pipeline``; more choices via ``pipelines={label: name or factory}``.
    requests/warmup/traced: request counts of each re-profiling run (kept small).
    runs: recorded run folders (or folders of them, e.g. ``data/runs``); a
        configuration found there is shown without profiling.
    debounce_s: quiet time after the last change before profiling starts.
    cache_size: run summaries kept (least recently used dropped).
    profile_fn: the profiling function (``workbench.runner.profile``); tests inject a fake.
    start: draw (or profile) the first configuration right away.
    """

    def __init__(self, example: str | Callable = "text", *, pipelines: dict[str, Any] | None = None,
                 batch_size: int = 1, batch_sizes: tuple[int, ...] = BATCH_SIZES, precision: str = "fp32",
                 device: str = "cpu", sla_ms: float | None = None, requests: int = 20, warmup: int = 3,
                 traced: int = 1, runs: Any = None, debounce_s: float = 0.3, cache_size: int = 16,
                 profile_fn: Callable | None = None, start: bool = True):
        self.targets = _targets(example, pipelines)
        self.requests, self.warmup, self.traced = requests, warmup, traced
        self.profile_fn = profile_fn
        self.profile_calls = 0
        self.cache = LRUCache(cache_size)
        self.figures = LRUCache(4 * cache_size)  # built figures and their JSON, per (run, view, options)
        self.recorded = index_runs(runs)
        self.current: RunView | None = None
        self.last_error: BaseException | None = None
        self.jobs = JobQueue(debounce_s, on_error=self._unexpected)
        self._render_lock = threading.RLock()
        self._build_controls(batch_size, sorted(set(batch_sizes) | {batch_size}), precision, device, sla_ms)
        self.view = self._layout()
        self._quiet = False  # set() moves several controls, then reacts once
        for control in (self.pipeline, self.batch_size, self.precision, self.device):
            control.observe(lambda _change: self._quiet or self._changed(), "value")
        self.sla.observe(lambda _change: self._quiet or self._redraw(budget=True), "value")
        for control in (self.stage, self.kind):
            control.observe(self._distribution_option, "value")
        self.cancel_button.on_click(lambda _b: self.cancel())
        self.rerun_button.on_click(lambda _b: self.refresh(force=True))
        if start:
            self.refresh()

    # -- public API ---------------------------------------------------------
    @property
    def key(self) -> Key:
        return (self.pipeline.value, self.device.value, int(self.batch_size.value), self.precision.value)

    @property
    def config(self) -> PipelineConfig:
        return PipelineConfig(device=self.device.value, batch_size=int(self.batch_size.value),
                              precision=self.precision.value)

    @property
    def message(self) -> str:
        """The text of the message line (errors, warnings, cancellation); "" when clear."""
        return self.message_line.text

    def set(self, **values: Any) -> "LatencyExplorer":
        """Move controls as a user would, then react once: ``set(batch_size=8, precision="bf16", sla_ms=50)``."""
        controls = {"pipeline": self.pipeline, "batch_size": self.batch_size, "precision": self.precision,
                    "device": self.device, "sla_ms": self.sla, "stage": self.stage, "kind": self.kind}
        unknown = sorted(set(values) - set(controls))
        if unknown:
            raise TypeError(f"set() got unknown controls {unknown}; use some of {sorted(controls)}")
        key = self.key
        self._quiet = True
        try:
            for name, value in values.items():
                controls[name].value = (value or 0.0) if name == "sla_ms" else value
        finally:
            self._quiet = False
        if self.key != key:
            self._changed()
        elif values:
            self._redraw(budget=True, distribution=True)
        return self

    def refresh(self, force: bool = False) -> None:
        """Show the current configuration; ``force`` profiles it again even if cached."""
        self._changed(force=force)

    def wait(self, timeout: float = 300.0) -> "LatencyExplorer":
        """Block until queued and running profiles are done (tests, notebooks)."""
        self.jobs.wait(timeout)
        return self

    def cancel(self) -> None:
        """Stop the running profile (between two requests) and drop the queued one."""
        if self.jobs.cancel():
            self.message_line.show("cancelling...", "warning")

    def _repr_mimebundle_(self, **kwargs):
        return self.view._repr_mimebundle_(**kwargs)

    # -- controls -----------------------------------------------------------
    def _build_controls(self, batch_size, batch_sizes, precision, device, sla_ms) -> None:
        w = widgets
        self.pipeline = w.Dropdown(options=list(self.targets), value=next(iter(self.targets)), description="pipeline")
        self.batch_size = w.SelectionSlider(options=batch_sizes, value=batch_size, description="batch size",
                                            continuous_update=False)
        self.precision = w.ToggleButtons(options=list(PRECISIONS), value=precision, description="precision",
                                         style={"button_width": "56px"})
        self.device = w.ToggleButtons(options=available_devices(), value=device, description="device",
                                      style={"button_width": "56px"})
        self.sla = w.BoundedFloatText(value=sla_ms or 0.0, min=0.0, max=1e6, step=1.0, description="SLA (ms)",
                                      layout=w.Layout(width="170px"))
        self.stage = w.Dropdown(options=[("end to end", "")], value="", description="distribution")
        self.kind = w.ToggleButtons(options=["histogram", "cdf"], value="histogram", style={"button_width": "80px"})
        self.progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="200px", visibility="hidden"))
        self.cancel_button = w.Button(description="cancel", disabled=True,
                                      layout=w.Layout(width="90px"))
        self.rerun_button = w.Button(description="measure here", tooltip="profile this configuration on this machine now",
                                     layout=w.Layout(width="120px"))
        self.status = w.Label(value="")
        self.message_line = MessageLine()
        self.budget_pane, self.distribution_pane, self.flame_pane = FigurePane(), FigurePane(), FigurePane(520)

    def _layout(self) -> widgets.Widget:
        w = widgets
        row = w.Layout(flex_flow="row wrap", align_items="center")
        controls = w.VBox([
            w.HBox([self.pipeline, self.batch_size, self.sla], layout=row),
            w.HBox([self.precision, self.device], layout=row),
            w.HBox([self.rerun_button, self.cancel_button, self.progress, self.status], layout=row),
            self.message_line.view,
        ])
        dist_controls = w.HBox([self.stage, self.kind], layout=row)
        figures = w.VBox([self.budget_pane.view, dist_controls, self.distribution_pane.view, self.flame_pane.view])
        return w.VBox([controls, figures], layout=w.Layout(width="100%"))

    # -- the one change path -----------------------------------------------
    def _changed(self, force: bool = False) -> None:
        key = self.key
        try:
            config = self.config
            _check_config(config)
        except WorkbenchError as exc:
            self.jobs.cancel()
            self._show_error(key, exc)
            return
        view = None if force else self.cache.get(key)
        if view is not None:
            self.jobs.cancel()  # a queued run for another value is no longer wanted
            self._draw(view)
            return
        self.message_line.clear()
        self.status.value = f"queued: {_describe(key)}"
        self.jobs.submit(lambda cancel: self._measure(key, config, force, cancel))

    def _measure(self, key: Key, config: PipelineConfig, force: bool, cancel: threading.Event) -> None:
        """Worker thread: load a recorded run or profile one, cache its summary, draw it if still wanted."""
        view = None if force else self.cache.get(key)
        if view is None:
            try:
                view = self._recorded(key) if (key in self.recorded and not force) else self._profile(key, config, cancel)
            except WorkbenchError as exc:
                self._show_error(key, exc)
                return
            finally:
                self._progress_done()
            self.cache.put(key, view)
        if key == self.key:
            self._draw(view)

    def _recorded(self, key: Key) -> RunView:
        from ..record import load_run

        folder = self.recorded[key]
        self.status.value = f"loading recorded run {folder.name}..."
        run = load_run(folder)
        env = run.meta.get("env") or {}
        when = str(run.meta.get("created", ""))[:10]
        where = env.get("device_name") or env.get("cpu_model") or "?"
        return summarize(run, key, f"recorded run {folder.name} ({when}, {where})", flame_from_trace)

    def _profile(self, key: Key, config: PipelineConfig, cancel: threading.Event) -> RunView:
        profile = self.profile_fn
        if profile is None:
            from ..runner import profile
        self.profile_calls += 1
        self._progress_start(_describe(key))
        started = time.perf_counter()
        run = profile(self.targets[key[0]], config, requests=self.requests, warmup=self.warmup,
                      traced=self.traced, progress=self._progress_callback(), cancel=cancel)
        seconds = time.perf_counter() - started
        try:
            return summarize(run, key, f"measured here in {seconds:.1f} s", flame_from_trace)
        finally:
            discard_trace(run)

    # -- drawing -------------------------------------------------------------
    def _draw(self, view: RunView) -> None:
        with self._render_lock:
            self.current = view
            options = [("end to end", "")] + [(s, s) for s in view.stage_order]
            if list(self.stage.options) != options:
                self.stage.unobserve(self._distribution_option, "value")
                self.stage.options = options
                self.stage.value = ""
                self.stage.observe(self._distribution_option, "value")
            self._redraw(budget=True, distribution=True, flame=True)
            failed = f"; {view.failed} measured requests failed" if view.failed else ""
            self.status.value = f"{view.label}: {view.source}{failed}"
            if view.failed:
                self.message_line.show(f"{view.failed} measured requests failed; they are left out of the percentiles", "warning")
            else:
                self.message_line.clear()

    def _distribution_option(self, _change: dict) -> None:
        if not self._quiet:
            self._redraw(distribution=True)

    def _redraw(self, budget: bool = False, distribution: bool = False, flame: bool = False) -> None:
        with self._render_lock:
            view = self.current
            if view is None:
                return
            if budget:
                sla = self.sla.value or None
                self._show(self.budget_pane, (view, "budget", sla), lambda: budget_view(view, sla))
            if distribution:
                stage, kind = self.stage.value or None, self.kind.value
                self._show(self.distribution_pane, (view, "distribution", stage, kind),
                           lambda: distribution_view(view, stage, kind))
            if flame:
                self._show(self.flame_pane, (view, "flame"),
                           lambda: view.flame if view.flame is not None else empty_view("no trace for this run"))

    def _show(self, pane: FigurePane, key: tuple, build: Callable[[], Any]) -> None:
        """Draw a figure, building it and its JSON only the first time (``figures`` LRU)."""
        cached = self.figures.get(key)
        if cached is None:
            fig = build()
            cached = (fig, figure_bundle(fig, pane.height))
            self.figures.put(key, cached)
        pane.show(*cached)

    def _show_error(self, key: Key, exc: BaseException) -> None:
        from ..runner import Cancelled

        cancelled = isinstance(exc, Cancelled)
        self.status.value = f"{_describe(key)}: {'cancelled' if cancelled else 'not run'}"
        self.message_line.show(str(exc), "warning" if cancelled else "error")

    def _unexpected(self, exc: BaseException) -> None:
        """A bug rather than a user error: still a message, with the exception type, never a traceback."""
        self.last_error = exc
        self._progress_done()
        self.message_line.show(f"unexpected {type(exc).__name__}: {exc}", "error")

    # -- progress ------------------------------------------------------------
    def _progress_start(self, what: str) -> None:
        self.progress.value, self.progress.max = 0, 1
        self.progress.layout.visibility = "visible"
        self.cancel_button.disabled, self.cancel_button.button_style = False, "warning"
        self.status.value = f"profiling {what}..."

    def _progress_callback(self) -> Callable[[int, int, str], None]:
        last = [0.0]

        def progress(done: int, total: int, phase: str) -> None:
            now = time.monotonic()
            if done == total or now - last[0] >= PROGRESS_EVERY_S:
                last[0] = now
                self.progress.max, self.progress.value = total, done
                self.progress.description = phase
        return progress

    def _progress_done(self) -> None:
        self.progress.layout.visibility = "hidden"
        self.cancel_button.disabled, self.cancel_button.button_style = True, ""


def _targets(example: Any, pipelines: dict[str, Any] | None) -> dict[str, Any]:
    """Dropdown label -> example name or factory; the first entry is selected."""
    from ..examples import EXAMPLES

    first = {example: example} if isinstance(example, str) else {_label(example): example}
    if isinstance(example, str) and example not in EXAMPLES:
        from ..errors import PipelineError

        raise PipelineError(f"unknown example {example!r}; choose one of {', '.join(EXAMPLES)} or pass a factory")
    rest = {name: name for name in EXAMPLES} | dict(pipelines or {})
    return first | {k: v for k, v in rest.items() if k not in first}


def _label(factory: Callable) -> str:
    return getattr(factory, "__name__", None) or type(factory).__name__


def _check_config(config: PipelineConfig) -> None:
    from ..device import check_device
    from ..precision import check_precision

    check_device(config.device)
    check_precision(config)


def _describe(key: Key) -> str:
    pipeline, device, batch_size, precision = key
    return f"{pipeline} {device} bs={batch_size} {precision}"
