"""Live profiling one at a time across a whole server: thirty students measuring at once measure
each other (docs/room.md).

Every kernel shares one lock file (``WORKBENCH_LIVE_LOCK``), held with ``flock`` or
``msvcrt.locking``, which the OS releases when its holder dies (a culled kernel never leaves the
room locked). ``WORKBENCH_LIVE``: ``queue`` (one at a time), ``off`` (recorded runs only) or ``on``
(no queue, the default).
"""

from __future__ import annotations

import errno
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    import msvcrt

    fcntl = None

from workbench.errors import WorkbenchError

LOCK_ENV = "WORKBENCH_LIVE_LOCK"
MODE_ENV = "WORKBENCH_LIVE"
MODES = ("on", "queue", "off")
POLL_S = 0.1


class LiveProfilingError(WorkbenchError):
    """Live profiling is off on this server, or the queue did not free up in time."""


def live_mode(environ: dict | None = None) -> str:
    """``on``, ``queue`` or ``off`` from ``WORKBENCH_LIVE`` (default ``on``)."""
    mode = (os.environ if environ is None else environ).get(MODE_ENV, "on").strip().lower() or "on"
    if mode not in MODES:
        raise LiveProfilingError(f"{MODE_ENV}={mode!r} is not one of {', '.join(MODES)}")
    return mode


def lock_path(environ: dict | None = None) -> Path:
    """The server-wide lock file: ``WORKBENCH_LIVE_LOCK`` or ``<tempdir>/workbench-live.lock``."""
    env = os.environ if environ is None else environ
    return Path(env.get(LOCK_ENV) or Path(tempfile.gettempdir()) / "workbench-live.lock")


def _try_lock_fd(fd: int) -> bool:
    """The OS lock on an open file, without blocking; False when another process holds it."""
    if fcntl is None:  # Windows
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise


@contextmanager
def live_slot(
    *,
    timeout_s: float | None = None,
    on_wait: Callable[[], None] | None = None,
    environ: dict | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[float]:
    """Hold the server's live-profiling slot for the ``with`` block; yields the seconds waited.
    ``timeout_s``: give up (``LiveProfilingError``) after it, None waits; ``on_wait``: called once
    when the caller starts waiting; ``environ``, ``clock``, ``sleep``: injected in tests."""
    mode = live_mode(environ)
    if mode == "off":
        raise LiveProfilingError(
            "live profiling is off on this server: pick a recorded run "
            f"(the instructor can start it with {MODE_ENV}=queue)"
        )
    if mode == "on":
        yield 0.0
        return
    path = lock_path(environ)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o666)
    started, told = clock(), False
    try:
        while not _try_lock_fd(fd):
            waited = clock() - started
            if timeout_s is not None and waited >= timeout_s:
                raise LiveProfilingError(
                    f"another live run held the room's profiling slot ({path}) "
                    f"for {waited:.0f} s; try again, or pick a recorded run"
                )
            if not told and on_wait is not None:
                on_wait()
                told = True
            sleep(POLL_S)
        yield clock() - started
    finally:
        os.close(fd)  # closing the descriptor releases flock/msvcrt locks
