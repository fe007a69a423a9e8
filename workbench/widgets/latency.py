"""The latency explorer: batch size, precision, device, threads and pipeline -> budget, tail, distribution, flame.

An unseen configuration is drawn from a recorded run matching its fingerprint, else profiled on the
worker thread. Trust is shown, not assumed: the noise flag, the failures per stage, what a recorded
run differs in, and the runs it is read against (``summaries.beside_table``).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ..analysis.budget import recorded_noise
from ..config import PRECISIONS, PipelineConfig
from ..device import available_devices, prime_profiler
from ..errors import WorkbenchError
from ..noise import noise_line
from ..record import load_run
from .controller import Controller, LRUCache
from ..analysis.tail import tail_attribution
from ..plots import (
    budget_figure,
    distribution_figure,
    latency_over_run_figure,
    ratio_figure,
    tail_figure,
)
from ..plots.compare_figures import beside_figure
from ..plots.flame import differential_flame_figure, wait_flame_figure
from ..plots.tail import request_stages_figure
from ..plots.distributions import survival_figure
from ..plots.style import empty_figure
from .traces import flame_from_trace
from .panes import ClickablePane, DeferredPane, FigurePane, MessageLine, figure_bundle
from .latency_support import (
    Key,
    LiveRuns,
    RecordedRuns,
    check_config,
    clicked_request,
    failures_text,
    pinned_for,
    pipeline_targets,
    request_options,
    thread_options,
    verdict_text,
)
from .summaries import BUSY, RunView, beside_html, beside_table, describe, summarize

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
PROGRESS_EVERY_S = 0.1
# the far tail's points: the slowest 200 exactly, so the first view stays small
SURVIVAL_POINTS = 400
THREADS = 1  # live runs' torch threads by default, for the reason below
THREADS_REASON = (
    "torch's CPU thread pool busy-waits, so on shared cores more threads measure the contention, "
    "not the pipeline"
)
THREADS_WHY = f"threads: 1 by default: {THREADS_REASON}"
CLICK_REFUSED = "no stages shown for request"  # the message line of a click on a point not listed
WAITING = "waiting in the room's queue..."


@dataclasses.dataclass(frozen=True)
class Controls:
    """Where the explorer's controls start: its keywords ``batch_size=``, ``precision=``... are these.

    threads: of live runs (:data:`THREADS_WHY`; None: torch's default); ``"recorded"``: the recorded
        run's of the first configuration (1 without one), so a room's first view is that run.
    """

    batch_size: int = 1
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    precision: str = "fp32"
    device: str = "cpu"
    threads: int | None | str = THREADS
    sla_ms: float | None = None


class LatencyExplorer(Controller):
    """Controls -> a small profiling run (or a matching recorded one) -> budget, tail, distribution, flame.

    example: an example name (``workbench.examples.EXAMPLES``) or a factory ``build(config) ->
        Pipeline``; more choices via ``pipelines={label: name or factory}``.
    runs: recorded run folders (or folders of them, e.g. ``data/runs``): a configuration whose
        fingerprint matches one is shown without profiling (also on a device this machine lacks).
    live: how a configuration is measured here (:class:`~workbench.widgets.latency_support.LiveRuns`).
    start: draw (or profile) the first configuration right away.
    controls: where the controls start, the fields of :class:`Controls` (``batch_size=8, sla_ms=50``).
    """

    def __init__(
        self,
        example: str | Callable = "text",
        *,
        pipelines: dict[str, Any] | None = None,
        runs: Any = None,
        live: LiveRuns = LiveRuns(),
        debounce_s: float = 0.3,
        cache_size: int = 16,
        start: bool = True,
        **controls: Any,
    ):
        names = [f.name for f in dataclasses.fields(Controls)]
        if unknown := sorted(set(controls) - set(names)):
            raise TypeError(
                f"LatencyExplorer() got unknown keywords {unknown}: the controls are {names}; how "
                "live runs are made (profile, requests, warmup, traced, timeout_s, compare...) goes "
                "in live=LiveRuns(...)"
            )
        first = Controls(**controls)
        super().__init__(debounce_s=debounce_s, cache_size=cache_size)
        self.targets = pipeline_targets(example, pipelines)
        self.live = live
        self.profile_calls = 0
        self.figures = LRUCache(4 * cache_size)  # (run, pane, options) -> figure and its JSON
        self.recorded = RecordedRuns(runs)  # with the fingerprints looked up so far
        self.pinned: tuple[Key, PipelineConfig] | None = None  # A of "compare with B"
        self.comparison: dict | None = None  # the last "compare with B" result (Comparison.result)
        self.current: RunView | None = None
        self.previous: RunView | None = None  # the run on screen before the current one
        self.pinned_view: RunView | None = None  # A's run, when it was on screen as it was pinned
        if first.threads == "recorded":  # the recorded run's of the first configuration, else 1
            config = PipelineConfig(
                first.device, first.batch_size, first.precision, threads=THREADS
            )
            threads = self.recorded.recorded_threads(next(iter(self.targets.values())), config)
            first = dataclasses.replace(first, threads=threads or THREADS)
        self._build_controls(first)
        self._build_panes()
        self.view = self._layout()
        # every control and button wired to the one change path (or a redraw)
        self._react(self.refresh, self.pipeline, self.batch_size, self.precision, self.device)
        self._react(self.refresh, self.threads)
        self._react(lambda: self._redraw(budget=True), self.sla)
        self._react(lambda: self._redraw(distribution=True), self.stage, self.kind)
        self._react(lambda: self._redraw(request=True), self.request_picker)
        self.over_run_pane.on_click(self._point_clicked)
        self.cancel_button.on_click(lambda _b: self.cancel())
        self.rerun_button.on_click(lambda _b: self.refresh(force=True))
        self.pin_button.on_click(lambda _b: self.pin())
        self.compare_button.on_click(lambda _b: self.compare())
        if start:
            self.refresh()

    # -- public API ---------------------------------------------------------
    @property
    def key(self) -> Key:
        return (
            self.pipeline.value,
            self.device.value,
            int(self.batch_size.value),
            self.precision.value,
            self.threads.value,
        )

    @property
    def config(self) -> PipelineConfig:
        _, device, batch_size, precision, threads = self.key
        return PipelineConfig(device, batch_size, precision, threads=threads)

    def set(self, **values: Any) -> "LatencyExplorer":
        """Move controls as a user would, then react once: ``set(batch_size=8, precision="bf16", sla_ms=50)``."""
        key = self.key
        if "sla_ms" in values:
            values["sla_ms"] = values["sla_ms"] or 0.0
        self._move(values)
        if self.key != key:
            self.refresh()
        elif values:
            self._redraw(budget=True, distribution=True, request="request" in values)
        return self

    def show_request(self, request: int) -> bool:
        """Show one request's stages (a click on its point of the latency-over-run chart): the request
        picker moves to it; one it does not list (warm-up, failed) is refused in the message line."""
        if request not in [value for _label, value in self.request_picker.options]:
            self.message_line.show(
                f"{CLICK_REFUSED} {request}: not a successful measured request of this run, "
                "so its stages are not in the budget; click a blue point",
                "warning",
            )
            return False
        if self.message_line.text.startswith(CLICK_REFUSED):  # our own refusal, no other error
            self.message_line.clear()
        self.request_picker.value = request  # its observer redraws the ring and the stages
        return True

    def pin(self) -> None:
        """Pin the current configuration as A of "compare with B"."""
        self.pinned = (self.key, self.config)
        current = self.current
        self.pinned_view = current if current is not None and current.key == self.key else None
        self.pin_label.value = f"A: {describe(self.key)}"

    def compare(self) -> None:
        """Compare the current configuration (B) with the pinned one (A), interleaved in this process."""
        try:
            a_key, a_config = pinned_for(self.pinned, self.key, _measurable)
        except WorkbenchError as exc:
            self.message_line.show(str(exc), "error")
            return
        b_key, b_config = self.key, self.config
        self.status.value = f"comparing {describe(b_key)} with {describe(a_key)}..."
        self.jobs.submit(lambda cancel: self._compare(a_key, a_config, b_key, b_config))

    # -- controls -----------------------------------------------------------
    def _build_controls(self, first: Controls) -> None:
        """The configuration's controls, at ``first``; the batch sizes include the recorded runs'."""
        w = widgets
        self.pipeline = w.Dropdown(
            options=list(self.targets), value=next(iter(self.targets)), description="pipeline"
        )
        recorded = self.recorded.batch_sizes(self.pipeline.value)
        self.batch_size = w.SelectionSlider(
            options=sorted(set(first.batch_sizes) | {first.batch_size} | recorded),
            value=first.batch_size,
            description="batch size",
            continuous_update=False,
        )
        self.precision = w.ToggleButtons(
            options=list(PRECISIONS),
            value=first.precision,
            description="precision",
            style={"button_width": "56px"},
        )
        self.device = w.ToggleButtons(
            options=self.recorded.device_options(available_devices(), self.pipeline.value),
            value=first.device,
            description="device",
            style={"button_width": "auto"},
        )
        threads = first.threads
        self.threads = w.Dropdown(
            options=thread_options(threads),
            value=threads,
            description="threads",
            layout=w.Layout(width="200px"),
        )
        why = (
            THREADS_WHY
            if threads == THREADS
            else f"threads: {threads} as the recorded runs; for live runs pick 1: {THREADS_REASON}"
        )
        self.threads_why = w.HTML(value=f'<span style="color:#666;font-size:90%">{why}</span>')
        self.sla = w.BoundedFloatText(
            value=first.sla_ms or 0.0,
            min=0.0,
            max=1e6,
            step=1.0,
            description="SLA (ms)",
            layout=w.Layout(width="170px"),
        )
        self.stage = w.Dropdown(options=[("end to end", "")], value="", description="distribution")
        self.kind = w.ToggleButtons(
            options=["histogram", "cdf"], value="histogram", style={"button_width": "80px"}
        )
        self.request_picker = w.Dropdown(
            options=[("(none)", None)],
            value=None,
            description="request",
            layout=w.Layout(width="320px"),
        )
        names = ("pipeline", "batch_size", "precision", "device", "threads", "stage", "kind")
        self.controls = {name: getattr(self, name) for name in names}
        self.controls |= {"sla_ms": self.sla, "request": self.request_picker}

    def _build_panes(self) -> None:
        """The buttons, the message lines and the figure panes."""
        w = widgets
        self.progress = w.IntProgress(max=1, layout=w.Layout(width="200px", visibility="hidden"))
        self.cancel_button = _button("cancel", "90px", disabled=True)
        self.rerun_button = _button(
            "measure here", "120px", tooltip="profile this configuration on this machine now"
        )
        self.pin_button = _button("pin as A", "90px", tooltip="keep this configuration as A")
        why = "measure this configuration (B) and A interleaved; ratio with interval"
        self.compare_button = _button("compare with B", "130px", tooltip=why)
        self.pin_label = w.Label(value="A: (none pinned)")
        self.notes = MessageLine()  # what a recorded run differs in
        self.noise_line = MessageLine()  # the noise flag of the run on screen
        self.failures_line = MessageLine()  # its failures per stage, with messages
        self.index_note = MessageLine()  # recorded runs that could not be read: skipped, said here
        self.index_note.show(self.recorded.note, "warning")
        self.budget_pane, self.distribution_pane = FigurePane(), FigurePane()
        self.budget_pane.view.add_class("workbench-budget")  # the page's budget, whatever is above
        # drawn on the page when asked: most of the first view's figure JSON
        self.flame_pane = DeferredPane(520, "flame graph of the traced request")
        self.tail_pane, self.request_pane = FigurePane(320), FigurePane(320)
        # the far tail of the stage picked for the distribution
        self.survival_pane = FigurePane(320)
        self.over_run_pane = ClickablePane(360)
        self.compare_pane = FigurePane(380)
        # slow minus median sampled stacks; work beside waits (every thread sampled): hidden without
        self.stacks_pane, self.waits_pane = FigurePane(420), FigurePane(420)
        # the runs the one on screen is read against (summaries.beside_table); hidden while alone
        self.beside_line = MessageLine()
        self.beside_table = w.HTML()
        self.beside_pane = FigurePane(300)
        for pane in (self.stacks_pane, self.waits_pane, self.beside_pane):
            pane.view.layout.display = "none"
        run_figures = "budget tail distribution survival over_run request flame stacks waits"
        self.run_panes = [getattr(self, f"{name}_pane") for name in run_figures.split()]
        self.beside_rows = None  # the table drawn, None while alone

    def _layout(self) -> widgets.Widget:
        w = widgets
        row = w.Layout(flex_flow="row wrap", align_items="center")
        controls = w.VBox(
            [
                w.HBox([self.pipeline, self.batch_size, self.sla], layout=row),
                w.HBox([self.precision, self.device], layout=row),
                w.HBox([self.threads, self.threads_why], layout=row),
                w.HBox(
                    [self.rerun_button, self.cancel_button, self.progress, self.status], layout=row
                ),
                self.message_line.view,
                self.noise_line.view,
                self.beside_line.view,
                self.failures_line.view,
                self.notes.view,
                self.index_note.view,
            ]
        )
        # in the explorer's box itself: panes.first_figure_first cuts it after the budget
        figures = [
            self.beside_table,
            self.beside_pane.view,
            self.budget_pane.view,
            self.tail_pane.view,
            w.HBox([self.stage, self.kind], layout=row),
            self.distribution_pane.view,
            self.survival_pane.view,
            self.over_run_pane.view,
            self.request_picker,
            self.request_pane.view,
            self.flame_pane.view,
            self.stacks_pane.view,
            self.waits_pane.view,
            w.HBox([self.pin_button, self.compare_button, self.pin_label], layout=row),
            self.compare_pane.view,
        ]
        return w.VBox([controls, *figures], layout=w.Layout(width="100%"))

    # -- the one change path -----------------------------------------------
    def refresh(self, force: bool = False) -> None:
        """Show the current configuration; ``force`` profiles it again even if cached or recorded."""
        self._sync_choices()
        key = self.key
        try:
            config = self.config
        except WorkbenchError as exc:
            self.jobs.cancel()
            self.failed(key, exc)
            return
        self.message_line.clear()
        # a recorded run found without building the pipeline is drawn at once: the debounce is for
        # live runs, and so is priming the profiler (on this thread), which imports torch
        here, fresh = _measurable(config.device), force or key not in self.cache
        recorded = (
            fresh
            and not (force and here)
            and self.recorded.find(self.targets[key[0]], config, measurable=here, build=False)
            is not None
        )
        if not recorded and self.live.profile is None and fresh:
            prime_profiler()
        self.update(
            key,
            lambda cancel: self._measure(key, config, force, cancel),
            force=force,
            queued=f"queued: {describe(key)}",
            debounce_s=0 if recorded else None,
        )

    def _sync_choices(self) -> None:
        """Device labels and batch sizes follow the pipeline: its recorded cards and batch sizes."""
        pipeline = self.pipeline.value
        devices = self.recorded.device_options(available_devices(), pipeline)
        sizes = sorted(set(self.batch_size.options) | self.recorded.batch_sizes(pipeline))
        if list(self.device.options) == devices and list(self.batch_size.options) == sizes:
            return
        with self.quiet():
            device, batch_size = self.device.value, self.batch_size.value
            self.device.options, self.batch_size.options = devices, sizes
            self.device.value, self.batch_size.value = device, batch_size

    def _measure(
        self, key: Key, config: PipelineConfig, force: bool, cancel: threading.Event
    ) -> RunView:
        """Worker thread: a matching recorded run, else a live profile (when this machine can run it)."""
        target = self.targets[key[0]]
        here = _measurable(config.device)
        match = self.recorded.find(target, config, measurable=here)
        if match is not None and not (force and here):
            return self._recorded(key, match)
        hint = ""
        if not here:
            self.recorded.refuse_unmeasurable(key[1], config)
        elif self.recorded.runs:
            hint = self.recorded.other_threads_hint(target, config)
        check_config(config)
        try:
            view = self._profile(key, config, cancel, hint)
        finally:
            self._progress_done()
        # "measure here" on a recorded configuration: the recording stays beside the live run
        if match is not None:
            view = dataclasses.replace(view, reference=self._recorded(key, match))
        return view

    def _recorded(self, key: Key, match) -> RunView:
        folder = match.run.folder
        self.status.value = f"loading recorded run {folder.name}..."
        run = load_run(folder)
        where = match.run.device_name or run.meta.env.cpu_model or "?"
        source = f"recorded run {folder.name} ({match.run.created}, recorded on {where})"
        # its flame graph read from its trace when the flame pane is opened
        view = summarize(run, key, source, flame_from_trace, lazy_flame=True)
        return dataclasses.replace(view, notes=match.labels, recorded=True)

    def _profile(
        self, key: Key, config: PipelineConfig, cancel: threading.Event, hint: str = ""
    ) -> RunView:
        self.profile_calls += 1
        with self.live.slot(on_wait=self._waiting) as waited:
            self.progress.value, self.progress.max = 0, 1
            self.progress.layout.visibility = "visible"
            self.cancel_button.disabled, self.cancel_button.button_style = False, "warning"
            self.status.value = f"profiling {describe(key)}..."
            started = self.live.clock()
            run = self.live.measure(self.targets[key[0]], config, self._progress_callback(), cancel)
        seconds = self.live.clock() - started
        queue = f"waited {waited:.1f} s in the room's queue, " if waited >= 0.05 else ""
        # a run stopped by the per-request timeout names the stage still stuck
        meta = getattr(run, "meta", None)
        stuck = meta is not None and meta.status == "incomplete: timeout" and len(run.requests)
        stopped = f"; stopped: {run.requests['error_message'].iloc[-1]}" if stuck else ""
        source = f"{queue}measured here in {seconds:.1f} s{stopped}{hint}"
        try:
            return summarize(run, key, source, flame_from_trace)
        finally:
            run.close()  # its scratch trace folder (a saved run's files are untouched)

    # -- compare with B -------------------------------------------------------
    def _compare(
        self, a_key: Key, a_config: PipelineConfig, b_key: Key, b_config: PipelineConfig
    ) -> None:
        """Worker thread: A and B interleaved in this process; the ratio figure and the end-to-end verdict."""
        try:
            check_config(a_config)
            check_config(b_config)
            with self.live.slot(self._waiting):
                result = self.live.interleave(self.targets[a_key[0]], [a_config, b_config])
        except WorkbenchError as exc:
            self.status.value = "not compared"
            self.message_line.show(str(exc), "error")
            return
        self.comparison = result
        self.compare_pane.show(ratio_figure(result, metric=result.get("metric") or "p50"))
        self.status.value = f"B {describe(b_key)} vs A {describe(a_key)}: {verdict_text(result)}"

    # -- drawing -------------------------------------------------------------
    def draw(self, view: RunView) -> None:
        options = [("end to end", "")] + [(s, s) for s in view.stage_order]
        with self.quiet():
            if list(self.stage.options) != options:
                self.stage.options = options
                self.stage.value = ""
            picks = request_options(view)
            self.request_picker.options = picks
            self.request_picker.value = picks[0][1]
        if self.current is not None and self.current is not view:
            self.previous = self.current
        self.current = view
        self._show_beside(view)
        self._redraw(budget=True, distribution=True, flame=True, request=True)
        failed = f"; {view.failed} measured requests failed" if view.failed else ""
        self.status.value = f"{view.label}: {view.source}{failed}"
        self.message_line.clear()
        # trust: the noise flag, the failures and what a recorded run differs in
        noise = recorded_noise(view.noise)
        self.noise_line.show(noise_line(noise), "warning" if noise.get("noisy") else "info")
        self.failures_line.show(failures_text(view), "warning")
        self.notes.show("; ".join(view.notes), "info")

    def _show_beside(self, view: RunView) -> None:
        """The runs ``view`` is read against, as a table, a figure and a comparability line."""
        others = {"recorded": view.reference, "pinned": self.pinned_view, "before": self.previous}
        table = beside_table(view, others)
        alone = len(table) == 1
        self.beside_rows = None if alone else table
        _shown(self.beside_pane, not alone)
        self.beside_table.value = "" if alone else beside_html(table)
        if alone:
            self.beside_line.clear()
            return
        words = list(table["compared_with_now"].iloc[1:])
        busy = [w for w in words if BUSY in w]
        self.beside_line.show((busy or words)[0], "warning" if busy else "info")
        self._show(self.beside_pane, lambda: beside_figure(table), *others.values())

    def _redraw(
        self,
        budget: bool = False,
        distribution: bool = False,
        flame: bool = False,
        request: bool = False,
    ) -> None:
        with self._lock:
            view = self.current
            if view is None:
                return
            if budget:
                sla = self.sla.value or None
                self._show(
                    self.budget_pane,
                    lambda: budget_figure(view.summary, sla_ms=sla, tail=view.wait_line),
                    sla,
                )
                self._show(self.tail_pane, lambda: tail_figure(tail_attribution(*view.tables)))
            if distribution:
                stage, kind = self.stage.value or None, self.kind.value
                self._show(
                    self.distribution_pane,
                    lambda: distribution_figure(*view.tables, stage=stage, kind=kind),
                    stage,
                    kind,
                )
                self._show(
                    self.survival_pane,
                    lambda: survival_figure(*view.tables, stage=stage, max_points=SURVIVAL_POINTS),
                    stage,
                )
            if request:
                picked = self.request_picker.value
                self._show(
                    self.over_run_pane,
                    lambda: latency_over_run_figure(view.requests, picked=picked),
                    picked,
                )
                self._show(
                    self.request_pane, lambda: request_stages_figure(*view.tables, picked), picked
                )
            if flame:
                self._show(self.flame_pane, lambda: _flame_of(view))
                self._show(self.stacks_pane, lambda: differential_flame_figure(view.stacks))
                self._show(self.waits_pane, lambda: wait_flame_figure(view.wait_flames))
                _shown(self.stacks_pane, view.has_stacks)
                _shown(self.waits_pane, view.has_wait_flames)

    def _show(self, pane: FigurePane, build: Callable[[], Any], *options: Any) -> None:
        """Draw a figure of the run on screen, built once per (run, pane, options)."""
        key = (self.current, pane, *options)

        def figure() -> tuple[Any, dict]:
            cached = self.figures.get(key)
            if cached is None:
                fig = build()
                cached = (fig, figure_bundle(fig, pane.height))
                self.figures.put(key, cached)
            return cached

        if isinstance(pane, DeferredPane):
            pane.show_later(figure)
        else:
            pane.show(*figure())

    def _point_clicked(self, point: dict) -> None:
        request = clicked_request(point)
        if request is not None and self.current is not None:
            self.show_request(request)

    def _waiting(self) -> None:
        self.status.value = WAITING

    def failed(self, key: Key, exc: WorkbenchError) -> None:
        from ..guard import Cancelled  # 2 ms kept off the first view: only live runs raise it

        self._progress_done()
        cancelled = isinstance(exc, Cancelled)
        if cancelled and key != self.key:
            return  # superseded by a setting already on screen: nothing to say
        self.status.value = f"{describe(key)}: {'cancelled' if cancelled else 'not run'}"
        self.message_line.show(str(exc), "warning" if cancelled else "error")
        if not cancelled and key == self.key:
            self._clear_figures(f"not run: {describe(key)}: see the message above")

    def _clear_figures(self, why: str) -> None:
        """An error for the configuration on the controls: the figures of another one would pass for it."""
        with self._lock:
            self.current = None
            blank = empty_figure(why)
            for pane in self.run_panes:
                pane.show(blank)
            for pane in (self.stacks_pane, self.waits_pane, self.beside_pane):
                _shown(pane, False)
            self.beside_table.value, self.beside_rows = "", None
            with self.quiet():
                self.request_picker.options = [("(none)", None)]
                self.request_picker.value = None
            for line in (self.beside_line, self.noise_line, self.failures_line, self.notes):
                line.clear()

    def _unexpected(self, exc: BaseException) -> None:
        super()._unexpected(exc)
        self._progress_done()

    # -- progress ------------------------------------------------------------
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


def _button(description: str, width: str, **options: Any) -> widgets.Button:
    return widgets.Button(description=description, layout=widgets.Layout(width=width), **options)


def _flame_of(view: RunView) -> Any:
    """The run's flame graph; an unreadable trace says so in it (read when opened: no message)."""
    try:
        fig = view.flame.get()
    except WorkbenchError as exc:
        return empty_figure(f"no flame graph: {exc}")
    return fig if fig is not None else empty_figure("no trace for this run")


def _shown(pane: FigurePane, shown: bool) -> None:
    """Show or hide a pane of a run that may lack it: no empty plot on the page (code still reads it)."""
    pane.view.layout.display = "" if shown else "none"
    if not shown:
        pane.clear()


def _measurable(device: str) -> bool:
    """Whether this machine has the device family (the recorded-only devices are not)."""
    return device.split(":")[0] in available_devices()
