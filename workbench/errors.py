"""Exceptions raised by the workbench.

Every error a user can cause derives from :class:`WorkbenchError`; the command
line prints its message on one line and exits non-zero, without a traceback.
Messages say what was wrong and what to do.
"""

import re


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
    """The value at a msgspec error path such as ``config.batch_size`` or ``stages[2]`` (``missing``
    where there is none): a schema error quotes what the user wrote, not only what was expected."""
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        try:
            data = data[int(index)] if index else data[key]
        except (KeyError, IndexError, TypeError):
            return missing
    return data


def encodable(text: str) -> str:
    """``text`` as UTF-8 can hold it: what a run's tables and run.json store of user code's strings.

    A lone surrogate (a non-UTF-8 file name as ``os.fsdecode`` gives it, ``caf\\udce9.bin``) cannot be
    encoded, so a message holding one would be refused when the run is saved. Such bytes become
    backslash escapes (``caf\\\\xe9.bin``); other lone surrogates their ``\\\\udXXX`` escape. Text that
    encodes is returned as it is.
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate surrogateescape did not make (outside U+DC80-U+DCFF)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
