"""Exceptions raised by the workbench.

Every error a user can cause derives from :class:`WorkbenchError`; the command
line prints its message on one line and exits non-zero, without a traceback.
Messages say what was wrong and what to do.
"""


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
