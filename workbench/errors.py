"""Exceptions a user can cause (:class:`WorkbenchError`: one line, no traceback, from the command
line), the checks of values where they enter, and SIGTERM (``timeout``, CI cancellation, ``docker
stop``) handled like Ctrl-C: a command keeps what it measured, then exits 143 (128 + 15) not 130.
"""

import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_TERMINATED = 128 + signal.SIGTERM


class WorkbenchError(Exception):
    """Base class of the errors a user can cause (bad input, bad arguments)."""


class ConfigError(WorkbenchError, ValueError):
    """A pipeline configuration or argument is invalid (names the parameter)."""


class PrecisionError(ConfigError):
    """A precision that this device, build of torch or model cannot run."""


class PipelineError(WorkbenchError):
    """A pipeline or its factory cannot be loaded or built."""


class RunRecordError(WorkbenchError):
    """A run folder is missing, incomplete or not a workbench run."""


class TraceError(WorkbenchError, ValueError):
    """A profiler trace cannot be read: the message names the file and the problem."""


def is_int(value: object) -> bool:
    """An int, never a bool (``True`` is an int to Python, not a count to a user)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """An int or a float, never a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_int(name: str, value: object, low: int) -> None:
    """Raise :class:`ConfigError` naming ``name`` unless ``value`` is an integer >= ``low``."""
    if not (is_int(value) and value >= low):
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")


def value_at(data: object, path: str, missing: object = "?") -> object:
    """The value at a msgspec error path such as ``stages[2].name`` (``missing``: none)."""
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        try:
            data = data[int(index)] if index else data[key]
        except (KeyError, IndexError, TypeError):
            return missing
    return data


def encodable(text: str) -> str:
    """``text`` as UTF-8 can hold it (a run stores user code's strings): a lone surrogate, such as a
    non-UTF-8 file name's byte, becomes its backslash escape; other text is returned as it is."""
    try:  # text that encodes comes back as it is
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate surrogateescape did not make (outside U+DC80-U+DCFF)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


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
