"""Debounced background jobs, one at a time, the newest winning (plain threading, no widget).

A slider fires a change for every step it passes; profiling each would queue work the user no
longer wants. A cancelled job that ignores its cancel event cannot be stopped (a Python thread
cannot be killed): ``abandon_after_s`` later the queue goes on without it on a fresh thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Job = Callable[[threading.Event], Any]
ErrorHandler = Callable[[BaseException], None]
ABANDON_AFTER_S = 2.0


class JobStuck(RuntimeError):
    """A cancelled job did not stop within ``abandon_after_s``; its thread was abandoned."""


class JobQueue:
    """Run submitted jobs on a worker thread, ``debounce_s`` after the last :meth:`submit`; each gets
    its own ``threading.Event``, set by :meth:`cancel`.

    on_error: called on the worker thread with what a job raises (a :class:`JobStuck` for an
        abandoned one); without it, or when it raises, :meth:`wait` re-raises it.
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
        self._pending: Job | None = None
        self._timer: threading.Timer | None = None
        self._ready = False  # the pending job's debounce delay has passed
        self._running: threading.Event | None = None  # cancel event of the running job

    @property
    def busy(self) -> bool:
        """True while a job runs or waits to run."""
        with self._cond:
            return self._running is not None or self._pending is not None

    def submit(self, job: Job, debounce_s: float | None = None) -> None:
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
            if self._running is not None or self._pending is None:
                return
            job = self._take()
        threading.Thread(target=self._work, args=(job,), name="workbench-job", daemon=True).start()

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
            item = self._take() if self._pending is not None and self._ready else None
            self._cond.notify_all()
        if item is not None:
            threading.Thread(
                target=self._work, args=(item,), name="workbench-job", daemon=True
            ).start()

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
                with self._cond:
                    current = self._running is cancel
                if current:  # an abandoned job's late error is nobody's business any more
                    self._fail(exc)
            with self._cond:
                if self._running is not cancel:  # abandoned meanwhile: the queue went on without it
                    self.stuck -= 1
                    return
                self._running = None
                item = self._take() if self._pending is not None and self._ready else None
                self._cond.notify_all()
