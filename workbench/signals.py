"""SIGTERM (``timeout``, CI cancellation, ``docker stop``) handled like Ctrl-C: a command keeps what
it measured, then exits 143 (128 + 15, as a shell reports it) instead of 130.
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
    """Within the block SIGTERM raises ``KeyboardInterrupt`` in the main thread, as Ctrl-C does."""
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
    """Say that SIGTERM stopped the command, from code that routes it to its own graceful stop."""
    _received.append(signal.SIGTERM)
