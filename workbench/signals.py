"""SIGTERM handled like Ctrl-C: what ``timeout``, CI cancellation and ``docker stop`` send.

Python turns SIGINT into ``KeyboardInterrupt`` in the main thread, and every command already keeps
what it measured on it (``profile`` and ``load`` write the run folder with status ``interrupted``).
:func:`sigterm_as_interrupt` makes SIGTERM take the same path, remembering that it was SIGTERM so
that :func:`workbench.cli.main` exits 143 (128 + 15, what a shell reports for a process SIGTERM
ended) instead of 130. An event loop that drains gracefully on Ctrl-C (``load --url``) routes
SIGTERM to the same drain and calls :func:`note_terminated`. ``serve`` installs its own handlers
while it serves (uvicorn shuts down on both signals; SIGTERM is its documented stop) and reports
which one stopped it. Only the main thread can install a handler; elsewhere (a notebook's worker
thread) nothing changes.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_TERMINATED = 128 + signal.SIGTERM

_received: list[int] = []


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` in the main thread, as Ctrl-C does."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        _received.append(signum)
        raise KeyboardInterrupt("terminated (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def terminated() -> bool:
    """True when SIGTERM arrived inside the last :func:`sigterm_as_interrupt` block."""
    return bool(_received)


def note_terminated() -> None:
    """For code that routes SIGTERM to its own graceful stop (the served-load client's event loop):
    say that SIGTERM, not Ctrl-C, stopped the command, so that it exits 143."""
    _received.append(signal.SIGTERM)
