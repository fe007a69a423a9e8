"""The trace explorer: pick or upload a ``torch.profiler`` trace -> launch, transfer, timeline, step, flame views.

Only a trace's figures are cached; uploads go to a private folder, removed by ``close()``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import plotly.graph_objects as go

from ..analysis.flame import flame_tree
from ..errors import ConfigError, WorkbenchError
from ..examples import data_dir
from ..naming import slug
from ..plots import (
    flame_figure,
    gpu_timeline_figure,
    launch_figure,
    request_flame_chart,
    step_breakdown_figure,
    transfer_figure,
)
from ..plots.style import empty_figure
from ..trace import load_trace
from ..trace.read import DEFAULT_MAX_TRACE_BYTES
from ..units import ns_to_ms
from .controller import Controller
from .panes import FigurePane

FLAME_MAX_NODES = 400
VIEWS = ("launches", "transfers", "timeline", "steps", "flame", "request")
# JSON text of an upload, checked while decompressing (a gzip bomb stops here)
UPLOAD_MAX_TRACE_BYTES = 256 * 2**20
TRACE_PATTERNS = ("*.json.gz", "*.json")
UPLOAD_LIMIT_ENV = "WORKBENCH_UPLOAD_LIMIT_BYTES"  # set by the room launcher for its kernels
PAGE_UPLOAD_LIMIT_BYTES = 10 * 2**20  # plain Voila's websocket message limit (tornado's default)


def upload_hint(environ: Any = None) -> str:
    """The upload button's tooltip: the page's size limit (``WORKBENCH_UPLOAD_LIMIT_BYTES``, set by
    the launcher), and what to do past it (the page itself refuses a larger file)."""
    raw = (os.environ if environ is None else environ).get(UPLOAD_LIMIT_ENV, "")
    limit = int(raw) if raw.strip().isdigit() else PAGE_UPLOAD_LIMIT_BYTES
    return (
        f"uploads up to {limit / 2**20:.0f} MiB (.json or .json.gz); "
        "for a larger trace run: python -m workbench analyze FILE"
    )


def trace_choices(paths: Any = None) -> dict[str, Path]:
    """Label -> trace file, from files and folders; default ``data/traces`` and the traces of ``data/runs``."""
    if paths is None:
        root = data_dir()
        paths = [root / "traces", *sorted((root / "runs").glob("*"))] if root.is_dir() else []
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: dict[str, Path] = {}
    for item in map(Path, paths):
        globbed = (f for pattern in TRACE_PATTERNS for f in item.glob(pattern))
        for f in [item] if item.is_file() else sorted(globbed):
            label = f.name if item.is_file() or item.name == "traces" else f"{item.name}/{f.name}"
            found.setdefault(label, f)
    return found


def flame_from_trace(path: str | os.PathLike) -> go.Figure:
    """Load a trace and draw its flame graph (stage -> operators -> runtime calls -> kernels, copies)."""
    tree = flame_tree(load_trace(path).events)
    return flame_figure(tree, title="Flame graph of the traced requests", max_nodes=FLAME_MAX_NODES)


def trace_figures(trace) -> dict:
    """Every view of a loaded trace (``workbench.trace.Trace``), plus a one-line ``summary``: file,
    event count, platform, time span (ms)."""
    events = trace.events
    span_ms = (
        ns_to_ms(int((events["ts_ns"] + events["dur_ns"]).max()) - int(events["ts_ns"].min()))
        if len(events)
        else 0.0
    )
    platform = trace.meta.get("platform", "?")
    return {
        "launches": launch_figure(trace),
        "transfers": transfer_figure(trace),
        "timeline": gpu_timeline_figure(trace),
        "steps": step_breakdown_figure(trace),
        "flame": flame_figure(
            flame_tree(trace), title=f"Flame graph: {trace.path.name}", max_nodes=FLAME_MAX_NODES
        ),
        "request": request_chart(trace, 0),
        "summary": f"{trace.path.name}: {len(events):,} events, {platform}, {span_ms:,.1f} ms span",
    }


def request_chart(events, request: int) -> go.Figure:
    """The request flame chart, or a figure saying why there is none (a request out of range)."""
    try:
        return request_flame_chart(events, request=request)
    except ConfigError as exc:
        return empty_figure(str(exc), "Request flame chart")


class TraceExplorer(Controller):
    """Pick a trace (or upload one) and see where its time goes; ``paths``: trace files or folders of
    them (default: ``data/traces`` and the traces in ``data/runs``)."""

    def __init__(
        self, paths: Any = None, *, cache_size: int = 4, debounce_s: float = 0.0, start: bool = True
    ):
        super().__init__(debounce_s=debounce_s, cache_size=cache_size)
        self.choices = trace_choices(paths)
        self.loads = 0
        self.events = None  # the events table on screen (for the request picker)
        self._events_key: str | None = None
        self._upload_dir: Path | None = None  # made on the first upload
        w = widgets
        options = [(label, str(path)) for label, path in self.choices.items()]
        self.picker = w.Dropdown(
            options=options or [("(no traces found)", "")],
            description="trace",
            layout=w.Layout(width="460px"),
        )
        self.upload = w.FileUpload(
            accept=".json,.gz", multiple=False, description="upload trace", tooltip=upload_hint()
        )
        self.request = w.BoundedIntText(
            value=0, min=0, max=1_000_000, description="request", layout=w.Layout(width="170px")
        )
        self.panes = {name: FigurePane(520 if name == "flame" else 400) for name in VIEWS}
        row = w.Layout(flex_flow="row wrap", align_items="center")
        head = w.VBox(
            [w.HBox([self.picker, self.upload, self.status], layout=row), self.message_line.view]
        )
        *views, request_view = (self.panes[name].view for name in VIEWS)  # the request chart last
        self.view = w.VBox(
            [head, *views, self.request, request_view], layout=w.Layout(width="100%")
        )
        self._react(self.refresh, self.picker)
        self.upload.observe(self._uploaded, "value")
        self._react(self._request_changed, self.request)
        if start and options:
            self.refresh()

    @property
    def key(self) -> str:
        return self.picker.value

    def refresh(self) -> None:
        """Show the picked trace (from the cache when seen before)."""
        key = self.picker.value
        if key:
            self.update(
                key, lambda cancel: self._figures(key), queued=f"loading {Path(key).name}..."
            )

    def load_bytes(self, name: str, data: bytes) -> None:
        """Show an uploaded trace (what the upload button does); its file lives until :meth:`close`."""
        digest = hashlib.sha1(data).hexdigest()[:12]
        if self._upload_dir is None:
            self._upload_dir = Path(tempfile.mkdtemp(prefix="workbench-uploads-"))
        path = self._upload_dir / f"{digest}-{slug(name)}"  # a name from the browser is not a path
        path.write_bytes(data)
        label = f"uploaded: {name}"
        self.choices[label] = path
        key = str(path)
        self.update(key, lambda cancel: self._load_upload(key, label), force=True)

    def close(self) -> None:
        """Forget uploads and cached figures; remove the upload folder."""
        self.jobs.cancel()
        self.cache.clear()
        self.events = None
        if self._upload_dir is not None:
            shutil.rmtree(self._upload_dir, ignore_errors=True)
            self._upload_dir = None

    def _uploaded(self, change: dict) -> None:
        if change["new"]:
            item = change["new"][0]
            name, data = item["name"], bytes(item["content"])
            self.upload.value = ()  # release the bytes held by the widget
            self.load_bytes(name, data)

    def _figures(self, key: str, label: str | None = None) -> dict[str, Any]:
        """Worker thread: read the trace and build every view."""
        try:
            trace = self._load(key)
        except WorkbenchError:
            self.status.value = f"{label or Path(key).name}: not loaded"
            raise
        self.loads += 1
        return trace_figures(trace)

    def _load(self, key: str) -> Any:
        """Worker thread: read a trace and keep its events for the request picker."""
        trace = load_trace(key, max_bytes=self._max_bytes(Path(key)))
        with self._lock:
            self.events, self._events_key = trace.events, key
        return trace

    def failed(self, key: str, exc: WorkbenchError) -> None:
        self.message_line.show(str(exc), "error")

    def _load_upload(self, key: str, label: str) -> dict[str, Any]:
        """Worker thread: an upload becomes a picker choice (then drawn) once it has loaded."""
        figures = self._figures(key, label)
        options = [o for o in self.picker.options if o[1] and o[1] != key] + [(label, key)]
        with self.quiet():
            self.picker.options, self.picker.value = options, key
        return figures

    def _max_bytes(self, path: Path) -> int:
        """The JSON size cap for ``path``: :data:`UPLOAD_MAX_TRACE_BYTES` for uploads, else the default."""
        uploaded = self._upload_dir is not None and path.parent == self._upload_dir
        return UPLOAD_MAX_TRACE_BYTES if uploaded else DEFAULT_MAX_TRACE_BYTES

    def draw(self, figures: dict[str, Any]) -> None:
        for name in VIEWS:
            self.panes[name].show(figures[name])
        with self.quiet():
            self.request.value = 0
        self.status.value = figures["summary"]
        self.message_line.clear()

    def _request_changed(self) -> None:
        key, n = self.picker.value, self.request.value
        with self._lock:
            events = self.events if self._events_key == key else None
        if events is None:  # read again on the worker
            show = self.panes["request"].show
            self.jobs.submit(lambda cancel: show(request_chart(self._load(key).events, n)))
            return
        self.panes["request"].show(request_chart(events, n))
