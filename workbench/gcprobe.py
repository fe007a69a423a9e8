"""Garbage-collection pauses, timed through ``gc.callbacks``.

CPython calls each callback with ``"start"`` before a collection and ``"stop"`` after it.
:class:`GcProbe` keeps a running total of pause time (integer ns, on the run's clock), so a stage's
GC time is the total after the stage minus the total before it: two attribute reads per stage, no
allocation, nothing when no collection happens. A collection that starts inside a stage and ends
after it is charged to the stage it started in.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable


class GcProbe:
    """Running total of GC pause time (``pause_ns``), collections (``collections``) and the longest
    pause (``max_pause_ns``) while installed."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns):
        self.clock = clock
        self.pause_ns = 0
        self.collections = 0
        self.max_pause_ns = 0
        self._started_ns: int | None = None

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started_ns = self.clock()
        elif self._started_ns is not None:
            pause = self.clock() - self._started_ns
            self.pause_ns += pause
            self.collections += 1
            if pause > self.max_pause_ns:
                self.max_pause_ns = pause
            self._started_ns = None

    def __enter__(self) -> "GcProbe":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(ValueError):  # already removed by someone else: nothing to undo
            gc.callbacks.remove(self._callback)
