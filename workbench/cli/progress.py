"""A one-line progress bar on stderr for long commands (``analyze`` of a gigabyte trace).

A ``progress(stage, done, total)`` callback (:func:`workbench.trace.load_trace`'s); redraws are
throttled so a million calls cost nothing.
"""

from __future__ import annotations

import sys
import time

STAGES = {"read": "reading", "decode": "decoding", "analyze": "analyzing"}


class ProgressBar:
    """``bar(stage, done, total)`` redraws ``decoding  [#######.......]  48%`` on one line."""

    def __init__(
        self, stream=None, width: int = 30, min_interval_s: float = 0.1, clock=time.monotonic
    ):
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.min_interval_s = min_interval_s
        self.clock = clock
        self._last_s: float | None = None
        self._last_stage: str | None = None
        self.drawn = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        recent = self._last_s is not None and now - self._last_s < self.min_interval_s
        if recent and stage == self._last_stage and done < total:  # a new stage or the end: drawn
            return
        self._last_s, self._last_stage = now, stage
        self.stream.write("\r" + self.line(stage, done, total))
        self.stream.flush()
        self.drawn = True

    def line(self, stage: str, done: int, total: int) -> str:
        """The text of one redraw (no carriage return)."""
        share = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
        filled = int(share * self.width)
        return f"{STAGES.get(stage, stage):<10} [{'#' * filled}{'.' * (self.width - filled)}] {100 * share:3.0f}%"

    def close(self, *, erase: bool = False) -> None:
        """End the bar's line (nothing when it never drew); ``erase``: blank it instead, the cursor at
        its start, so that an error printed next is the line's one text (exit 2's one line)."""
        if self.drawn:
            width = len(self.line("analyze", 0, 1))
            self.stream.write("\r" + " " * width + "\r" if erase else "\n")
            self.stream.flush()
