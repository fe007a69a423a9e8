"""Garbage-collection pauses, timed through ``gc.callbacks``: a stage's GC time is the running total
(ns) after it minus before it, two attribute reads; a collection that starts inside a stage and ends
after it is charged to the stage it started in.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable


class GcProbe:
    """Total GC pause (``pause_ns``), ``collections`` and the longest (``max_pause_ns``)."""

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
