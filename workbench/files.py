"""Opening a file a user named: a regular file only, its size capped, before any parser sees it.

Opened non-blocking (a FIFO with no writer would block forever) and judged on the open descriptor,
so a file swapped after a check cannot slip through. Each refusal is one line, the reader's error.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

MAX_JSON_BYTES = 64 * 2**20  # a run.json, compare --json or sweep file: kilobytes in practice
MAX_TABLE_BYTES = 8 * 2**30  # a run's Parquet table: a million requests take tens of MB

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def open_regular(
    path: str | os.PathLike,
    error: type[Exception],
    what: str = "file",
    hint: str = "",
    max_bytes: int | None = None,
) -> BinaryIO:
    """``path`` opened for binary reading; ``error`` unless it is a regular file of at most
    ``max_bytes`` (None: any size); ``what`` names the file, ``hint`` ends a refusal."""
    try:
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        raise error(f"{path}: no such {what}") from None
    except OSError as exc:  # a socket (ENXIO), no permission, a name too long
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in _KINDS if test(mode)), "not a file")
            raise error(f"{path}: is {kind}, not a regular file{'; ' + hint if hint else ''}")
        size = os.fstat(fd).st_size
        if max_bytes is not None and size > max_bytes:
            raise error(_too_big(path, size, max_bytes, what))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(
    path: str | os.PathLike,
    max_bytes: int,
    error: type[Exception],
    what: str = "file",
    hint: str = "",
) -> bytes:
    """The bytes of the regular file ``path``, refused above ``max_bytes`` (or grown past)."""
    with open_regular(path, error, what, hint, max_bytes) as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise error(_too_big(path, len(data), max_bytes, what))
    return data


def _too_big(path: str | os.PathLike, size: int, max_bytes: int, what: str) -> str:
    return (
        f"{path}: {size:,} bytes, more than a {what} holds ({max_bytes:,}); refused before reading"
    )
