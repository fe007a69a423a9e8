"""The trace explorer: pick or upload a ``torch.profiler`` trace -> launch, transfer, timeline, step, flame views.

A trace is loaded on the worker thread (``workbench.trace.load_trace``), every
view is built from its events table once, and only the figures are cached
(LRU, per file); the events table of the trace on screen is the one large
object kept, for the request flame chart's request picker. Uploads are written
to a private temporary folder, removed by :meth:`TraceExplorer.close`; a file
that is not a readable trace shows its :class:`~workbench.errors.TraceError`
message.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from ..errors import WorkbenchError
from .cache import LRUCache
from .figures import request_chart, trace_figures
from .jobs import JobQueue
from .panes import FigurePane, MessageLine

VIEWS = ("launches", "transfers", "timeline", "steps", "flame", "request")
TRACE_PATTERNS = ("*.json.gz", "*.json")


def trace_choices(paths: Any = None) -> dict[str, Path]:
    """Label -> trace file, from files and folders; default ``data/traces`` and the traces of ``data/runs``."""
    if paths is None:
        from ..examples import data_dir

        root = data_dir()
        paths = [root / "traces", *sorted((root / "runs").glob("*"))] if root.is_dir() else []
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: dict[str, Path] = {}
    for item in map(Path, paths):
        files = [item] if item.is_file() else sorted(f for pat in TRACE_PATTERNS for f in item.glob(pat))
        for f in files:
            label = f.name if item.is_file() or item.name == "traces" else f"{item.name}/{f.name}"
            found.setdefault(label, f)
    return found


class TraceExplorer:
    """Pick a trace (or upload one) and see where its time goes.

    paths: trace files or folders of them (default: ``data/traces`` and the
        traces saved in ``data/runs``).
    cache_size: traces whose figures are kept (least recently used dropped).
    start: load the first trace right away.
    """

    def __init__(self, paths: Any = None, *, cache_size: int = 4, debounce_s: float = 0.0, start: bool = True):
        self.choices = trace_choices(paths)
        self.cache = LRUCache(cache_size)
        self.jobs = JobQueue(debounce_s, on_error=self._unexpected)
        self.loads = 0
        self.events = None  # the events table on screen (for the request picker)
        self._events_key: str | None = None
        self._upload_dir: Path | None = None  # made on the first upload
        self._lock = threading.RLock()
        w = widgets
        options = [(label, str(path)) for label, path in self.choices.items()]
        self.picker = w.Dropdown(options=options or [("(no traces found)", "")], description="trace",
                                 layout=w.Layout(width="460px"))
        self.upload = w.FileUpload(accept=".json,.gz", multiple=False, description="upload trace")
        self.request = w.BoundedIntText(value=0, min=0, max=1_000_000, description="request",
                                        layout=w.Layout(width="170px"))
        self.status = w.Label(value="")
        self.message_line = MessageLine()
        self.panes = {name: FigurePane(520 if name == "flame" else 400) for name in VIEWS}
        self.view = self._layout()
        self._silent = False
        self.picker.observe(lambda _c: self._silent or self.refresh(), "value")
        self.upload.observe(self._uploaded, "value")
        self.request.observe(lambda _c: self._silent or self._request_changed(), "value")
        if start and options:
            self.refresh()

    @property
    def message(self) -> str:
        return self.message_line.text

    def wait(self, timeout: float = 300.0) -> "TraceExplorer":
        self.jobs.wait(timeout)
        return self

    def refresh(self) -> None:
        """Show the picked trace (from the cache when seen before)."""
        key = self.picker.value
        if not key:
            return
        figures = self.cache.get(key)
        if figures is not None:
            self._draw(key, figures)
            return
        self.status.value = f"loading {Path(key).name}..."
        self.jobs.submit(lambda cancel: self._load(key, Path(key)))

    def load_bytes(self, name: str, data: bytes) -> None:
        """Show an uploaded trace (what the upload button does); its file lives until :meth:`close`."""
        digest = hashlib.sha1(data).hexdigest()[:12]
        if self._upload_dir is None:
            self._upload_dir = Path(tempfile.mkdtemp(prefix="workbench-uploads-"))
        path = self._upload_dir / f"{digest}-{Path(name).name}"
        path.write_bytes(data)
        label = f"uploaded: {name}"
        self.choices[label] = path
        self.jobs.submit(lambda cancel: self._load(str(path), path, label))

    def close(self) -> None:
        """Forget uploads and cached figures; remove the upload folder."""
        self.jobs.cancel()
        self.cache.clear()
        self.events = None
        if self._upload_dir is not None:
            shutil.rmtree(self._upload_dir, ignore_errors=True)
            self._upload_dir = None

    def _repr_mimebundle_(self, **kwargs):
        return self.view._repr_mimebundle_(**kwargs)

    def _layout(self) -> widgets.Widget:
        w = widgets
        row = w.Layout(flex_flow="row wrap", align_items="center")
        head = w.VBox([w.HBox([self.picker, self.upload, self.status], layout=row), self.message_line.view])
        panes = self.panes
        return w.VBox([head, panes["launches"].view, panes["transfers"].view, panes["timeline"].view,
                       panes["steps"].view, panes["flame"].view, self.request, panes["request"].view],
                      layout=w.Layout(width="100%"))

    def _uploaded(self, change: dict) -> None:
        files = change["new"]
        if not files:
            return
        item = files[0]
        name, data = item["name"], bytes(item["content"])
        self.upload.value = ()  # release the bytes held by the widget
        self.load_bytes(name, data)

    def _load(self, key: str, path: Path, label: str | None = None) -> None:
        """Worker thread: read the trace, build every view, cache the figures, draw."""
        from ..trace import load_trace

        try:
            trace = load_trace(path)
        except WorkbenchError as exc:
            self.status.value = f"{label or path.name}: not loaded"
            self.message_line.show(str(exc), "error")
            return
        self.loads += 1
        figures = trace_figures(trace)
        self.cache.put(key, figures)
        with self._lock:
            self.events, self._events_key = trace.events, key
        if label is not None:
            self._add_choice(label, key)
        if self.picker.value == key:
            self._draw(key, figures)

    def _add_choice(self, label: str, key: str) -> None:
        options = [o for o in self.picker.options if o[1] and o[1] != key] + [(label, key)]
        with self._quiet():
            self.picker.options = options
            self.picker.value = key

    @contextmanager
    def _quiet(self):
        """Change controls from code without their observers reacting."""
        self._silent = True
        try:
            yield
        finally:
            self._silent = False

    def _draw(self, key: str, figures: dict[str, Any]) -> None:
        with self._lock:
            for name in VIEWS:
                self.panes[name].show(figures[name])
            with self._quiet():
                self.request.value = 0
            self.status.value = figures["summary"]
            self.message_line.clear()

    def _request_changed(self) -> None:
        key, n = self.picker.value, self.request.value
        with self._lock:
            events = self.events if self._events_key == key else None
        if events is None:
            self.jobs.submit(lambda cancel: self._reload_for_request(key, n))
            return
        self.panes["request"].show(request_chart(events, n))

    def _reload_for_request(self, key: str, n: int) -> None:
        from ..trace import load_trace

        trace = load_trace(key)
        with self._lock:
            self.events, self._events_key = trace.events, key
        self.panes["request"].show(request_chart(trace.events, n))

    def _unexpected(self, exc: BaseException) -> None:
        self.last_error = exc
        self.message_line.show(f"unexpected {type(exc).__name__}: {exc}", "error")

