"""The controller skeleton the explorers share, and its LRU cache of results.

A control moves -> the result for the new setting is drawn from the cache at once, or computed on
the :class:`~workbench.widgets.jobs.JobQueue` worker and drawn if still wanted. A
:class:`~workbench.errors.WorkbenchError` is the user's problem: its message goes to the message
line. Anything else is a bug: kept in ``last_error`` and shown with its type, never a traceback.
A subclass supplies ``key`` (the current setting, hashable), ``draw(value)`` and ``refresh()``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import ipywidgets as widgets

from ..errors import WorkbenchError
from .jobs import JobQueue
from .panes import MessageLine

Compute = Callable[[threading.Event], Any]


class LRUCache:
    """Results per setting, ``get``/``put`` by hashable key, at most ``maxsize`` entries (the least
    recently used dropped); thread-safe. Small summaries and figure specs, never whole runs or traces."""

    def __init__(self, maxsize: int = 16):
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            if key not in self._items:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class Controller:
    """Debounce, one job at a time, cancel, an LRU cache of ``cache_size`` results, error display."""

    def __init__(self, *, debounce_s: float, cache_size: int):
        self.cache = LRUCache(cache_size)
        self.last_error: BaseException | None = None
        self.jobs = JobQueue(debounce_s, on_error=self._unexpected)
        self.status = widgets.Label(value="")
        self.message_line = MessageLine()
        self._lock = threading.RLock()  # drawing happens on the caller's and the worker's thread
        self._silent = False
        self.controls: dict[str, widgets.Widget] = {}  # name -> control, for set()

    # -- to be supplied by each explorer ------------------------------------
    @property
    def key(self) -> Hashable:
        raise NotImplementedError

    def draw(self, value: Any) -> None:
        raise NotImplementedError

    def failed(self, key: Hashable, exc: WorkbenchError) -> None:
        """A setting that cannot be computed: say why; the figures keep the last good result."""
        self.status.value = "not run"
        self.message_line.show(str(exc), "error")

    # -- shared behaviour ----------------------------------------------------
    @property
    def message(self) -> str:
        """The text of the message line (errors, warnings, cancellation); "" when clear."""
        return self.message_line.text

    def update(
        self,
        key: Hashable,
        compute: Compute,
        *,
        force: bool = False,
        queued: str = "",
        debounce_s: float | None = None,
    ) -> None:
        """Draw the result for ``key``: from the cache at once, or ``compute(cancel)`` on the worker
        (``force``: even when cached); ``queued`` is the status line meanwhile."""
        value = None if force else self.cache.get(key)
        if value is not None:
            self.jobs.cancel()  # a queued job for another setting is no longer wanted
            with self._lock:
                self.draw(value)
            return
        if queued:
            self.status.value = queued
        self.jobs.submit(lambda cancel: self._compute(key, compute, cancel), debounce_s)

    def wait(self, timeout: float = 300.0):
        """Block until queued and running jobs are done (tests, notebooks)."""
        self.jobs.wait(timeout)
        return self

    def cancel(self) -> bool:
        """Stop the running job (where it checks its cancel event) and drop the queued one."""
        had = self.jobs.cancel()
        if had:
            self.message_line.show("cancelling...", "warning")
        return had

    def set(self, **values: Any):
        """Move controls by name (``controls``) as a user would, then react once; None leaves one."""
        key = self.key
        self._move({name: value for name, value in values.items() if value is not None})
        if self.key != key:
            self.refresh()
        return self

    def refresh(self) -> None:
        """The simulators': the current setting's ``_figures(*key)``, computed on the worker."""
        key = self.key
        self.update(key, lambda cancel: self._figures(*key), queued="simulating...")

    def _move(self, values: dict[str, Any]) -> None:
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise TypeError(
                f"set() got unknown controls {unknown}; use some of {sorted(self.controls)}"
            )
        with self.quiet():
            for name, value in values.items():
                self.controls[name].value = value

    def _react(self, react: Callable[[], Any], *controls: widgets.Widget) -> None:
        """``react()`` on every change of ``controls`` made by a user (not under :meth:`quiet`)."""
        for control in controls:
            control.observe(lambda _c: self._silent or react(), "value")

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """Change controls from code without their observers reacting."""
        self._silent = True
        try:
            yield
        finally:
            self._silent = False

    def _repr_mimebundle_(self, **kwargs):
        return self.view._repr_mimebundle_(**kwargs)

    def _compute(self, key: Hashable, compute: Compute, cancel: threading.Event) -> None:
        try:
            value = compute(cancel)
        except WorkbenchError as exc:
            self.failed(key, exc)
            return
        self.cache.put(key, value)
        if key == self.key:
            with self._lock:
                self.draw(value)

    def _unexpected(self, exc: BaseException) -> None:
        """A bug rather than a user error: still a message, with the exception type, never a traceback."""
        self.last_error = exc
        self.message_line.show(f"unexpected {type(exc).__name__}: {exc}", "error")
