"""The controller the explorers share: a setting is drawn from the LRU cache at once, or computed on
the :class:`JobQueue` worker (debounced: a slider fires a change for every step it passes)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import ipywidgets as widgets

from ..errors import WorkbenchError
from .panes import MessageLine

Compute = Callable[[threading.Event], Any]
ErrorHandler = Callable[[BaseException], None]
ABANDON_AFTER_S = 2.0


class JobStuck(RuntimeError):
    """A cancelled job outlived ``abandon_after_s``: its thread was abandoned for a fresh one."""


class JobQueue:
    """Run submitted jobs on a worker thread, ``debounce_s`` after the last :meth:`submit`; a job's
    error (:class:`JobStuck` for an abandoned one) goes to ``on_error``, else :meth:`wait` raises it.
    """

    def __init__(
        self,
        debounce_s: float = 0.3,
        *,
        on_error: ErrorHandler | None = None,
        abandon_after_s: float = ABANDON_AFTER_S,
    ):
        if debounce_s < 0:
            raise ValueError(f"debounce_s must be >= 0, got {debounce_s}")
        if not abandon_after_s > 0:
            raise ValueError(f"abandon_after_s must be > 0, got {abandon_after_s}")
        self.debounce_s = debounce_s
        self.on_error = on_error
        self.abandon_after_s = abandon_after_s
        self.stuck = 0  # abandoned jobs whose thread is still running
        self.started = 0  # jobs that began running (for tests and the status line)
        self.last_error: BaseException | None = None
        self._cond = threading.Condition()
        self._pending: Compute | None = None
        self._timer: threading.Timer | None = None
        self._ready = False  # the pending job's debounce delay has passed
        self._running: threading.Event | None = None  # cancel event of the running job

    @property
    def busy(self) -> bool:
        """True while a job runs or waits to run."""
        with self._cond:
            return self._running is not None or self._pending is not None

    def submit(self, job: Compute, debounce_s: float | None = None) -> None:
        """Queue ``job``, replacing any queued one, and restart the debounce delay (``debounce_s``: this
        job's instead of the queue's, 0 for cheap work such as drawing a recorded run)."""
        delay = self.debounce_s if debounce_s is None else debounce_s
        if delay < 0:
            raise ValueError(f"debounce_s must be >= 0, got {delay}")
        with self._cond:
            self._pending, self._ready = job, False
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(delay, self._release)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> bool:
        """Drop the queued job and ask the running one to stop; True if there was one."""
        with self._cond:
            had = self._pending is not None or self._running is not None
            if self._timer is not None:
                self._timer.cancel()
            self._pending, self._timer, self._ready = None, None, False
            if self._running is not None:
                self._running.set()
                watchdog = threading.Timer(
                    self.abandon_after_s, self._abandon, args=(self._running,)
                )
                watchdog.daemon = True
                watchdog.start()
            self._cond.notify_all()
            return had

    def wait(self, timeout: float | None = 60.0) -> None:
        """Block until nothing runs or waits; re-raise an unhandled job error."""
        with self._cond:
            if not self._cond.wait_for(
                lambda: self._running is None and self._pending is None, timeout
            ):
                raise TimeoutError(f"jobs still running after {timeout} s")
            error, self.last_error = self.last_error, None
        if error is not None:
            raise error

    def _release(self) -> None:
        """Debounce delay over: start the pending job unless one is running."""
        with self._cond:
            if threading.current_thread() is not self._timer:
                return  # a newer submit replaced this timer
            self._timer, self._ready = None, True
            item = self._take() if self._running is None else None
        self._start(item)

    def _abandon(self, cancel: threading.Event) -> None:
        """Cancel's watchdog: free the queue if the cancelled job is still running."""
        with self._cond:
            if self._running is not cancel:
                return  # it stopped in time
        # said before the queue is freed, so that wait() returning means the message is out
        self._fail(
            JobStuck(
                f"a cancelled job was still running after {self.abandon_after_s:g} s (a stage that "
                "does not return?); its thread was abandoned and may still use the CPU"
            )
        )
        with self._cond:
            if self._running is not cancel:
                return  # it stopped meanwhile
            self._running = None
            self.stuck += 1
            item = self._take()
            self._cond.notify_all()
        self._start(item)

    def _take(self) -> tuple[Compute, threading.Event] | None:
        """The pending job, marked running, once its debounce delay has passed; else None."""
        if self._pending is None or not self._ready:
            return None
        job, cancel = self._pending, threading.Event()
        self._pending, self._ready, self._running = None, False, cancel
        self.started += 1
        return job, cancel

    def _fail(self, exc: BaseException) -> None:
        if self.on_error is None:
            self.last_error = exc
            return
        try:
            self.on_error(exc)
        except BaseException as handler_exc:  # noqa: BLE001 - kept for wait() to re-raise
            self.last_error = handler_exc

    def _work(self, item: tuple[Compute, threading.Event]) -> None:
        while item is not None:
            job, cancel = item
            try:
                job(cancel)
            except BaseException as exc:  # noqa: BLE001 - handed to on_error or re-raised by wait()
                with self._cond:
                    current = self._running is cancel
                if current:  # an abandoned job's late error is nobody's business any more
                    self._fail(exc)
            with self._cond:
                if self._running is not cancel:  # abandoned meanwhile: the queue went on without it
                    self.stuck -= 1
                    return
                self._running = None
                item = self._take()
                self._cond.notify_all()

    def _start(self, item: tuple[Compute, threading.Event] | None) -> None:
        if item is not None:
            threading.Thread(
                target=self._work, args=(item,), name="workbench-job", daemon=True
            ).start()


class LRUCache:
    """Thread-safe results per setting, at most ``maxsize`` (least recently used dropped); never runs."""

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
    """Debounce, one job at a time, cancel, an LRU cache of ``cache_size`` results, error display; a
    subclass supplies ``key`` (the current setting, hashable), ``draw(value)`` and ``refresh()``."""

    not_run = "not run"  # the status line of a setting that cannot be computed

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
        """The simulators': each of ``panes`` shows ``value``'s figure of its name, the status ``line``."""
        for name, pane in self.panes.items():
            pane.show(value[name])
        self.status.value = value["line"]
        self.message_line.clear()

    def failed(self, key: Hashable, exc: WorkbenchError) -> None:
        """A setting that cannot be computed: say why; the figures keep the last good result."""
        self.status.value = self.not_run
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

    def _simulator(self, *below: Any, start: bool) -> None:
        """The simulators' page: controls, status, messages, ``below``; a move simulates again."""
        row = widgets.HBox(
            list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap")
        )
        self.view = widgets.VBox(
            [row, self.status, *(part.view for part in (self.message_line, *below))],
            layout=widgets.Layout(width="100%"),
        )
        self._react(self.refresh, *self.controls.values())
        if start:
            self.refresh()

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
