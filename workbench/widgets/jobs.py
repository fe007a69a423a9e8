"""Debounced background jobs, one at a time, the newest request winning.

A slider fires a change for every step it passes; profiling each would queue
seconds of work the user no longer wants. :class:`JobQueue` waits ``debounce_s``
after the last change, then runs the newest job on a worker thread. While a
job runs, later submissions replace each other (only the newest is kept) and
start when the running one ends. Each job receives its own
``threading.Event``; :meth:`JobQueue.cancel` sets it (the runner checks it
between requests) and drops the queued job.

No ipywidgets here: the queue is plain threading, so tests drive it directly.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Job = Callable[[threading.Event], Any]
ErrorHandler = Callable[[BaseException], None]


class JobQueue:
    """Run submitted jobs on a worker thread: debounced, serial, newest wins.

    debounce_s: seconds to wait after the last :meth:`submit` before starting
        (0 starts at once, still on the worker thread).
    on_error: called (on the worker thread) with any exception a job raises;
        the queue keeps going. Without it (or when it raises itself), the
        exception is kept in ``last_error`` and re-raised by :meth:`wait`.
    """

    def __init__(self, debounce_s: float = 0.3, *, on_error: ErrorHandler | None = None):
        if debounce_s < 0:
            raise ValueError(f"debounce_s must be >= 0, got {debounce_s}")
        self.debounce_s = debounce_s
        self.on_error = on_error
        self.started = 0  # jobs that began running (for tests and the status line)
        self.last_error: BaseException | None = None
        self._cond = threading.Condition()
        self._pending: Job | None = None
        self._timer: threading.Timer | None = None
        self._ready = False  # the pending job's debounce delay has passed
        self._running: threading.Event | None = None  # cancel event of the running job

    @property
    def busy(self) -> bool:
        """True while a job runs or waits to run."""
        with self._cond:
            return self._running is not None or self._pending is not None

    def submit(self, job: Job) -> None:
        """Queue ``job``, replacing any queued one, and restart the debounce delay."""
        with self._cond:
            self._pending, self._ready = job, False
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.debounce_s, self._release)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> bool:
        """Drop the queued job and ask the running one to stop; True if there was one."""
        with self._cond:
            had = self._pending is not None or self._running is not None
            self._drop_pending()
            if self._running is not None:
                self._running.set()
            self._cond.notify_all()
            return had

    def wait(self, timeout: float | None = 60.0) -> None:
        """Block until nothing runs or waits; re-raise an unhandled job error."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._running is None and self._pending is None, timeout):
                raise TimeoutError(f"jobs still running after {timeout} s")
            error, self.last_error = self.last_error, None
        if error is not None:
            raise error

    def _drop_pending(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._pending, self._timer, self._ready = None, None, False

    def _release(self) -> None:
        """Debounce delay over: start the pending job unless one is running."""
        with self._cond:
            if threading.current_thread() is not self._timer:
                return  # a newer submit replaced this timer
            self._timer, self._ready = None, True
            if self._running is not None or self._pending is None:
                return
            job = self._take()
        threading.Thread(target=self._work, args=(job,), name="workbench-job", daemon=True).start()

    def _take(self) -> tuple[Job, threading.Event]:
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

    def _work(self, item: tuple[Job, threading.Event]) -> None:
        while item is not None:
            job, cancel = item
            try:
                job(cancel)
            except BaseException as exc:  # noqa: BLE001 - handed to on_error or re-raised by wait()
                self._fail(exc)
            with self._cond:
                self._running = None
                item = self._take() if self._pending is not None and self._ready else None
                self._cond.notify_all()
