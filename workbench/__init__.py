"""Inference Latency Workbench: where each request's time goes, stage by stage.

``import workbench`` is light (no torch, plotly or ipywidgets): names load their module on first
use, as Voila starts a fresh kernel for every visitor.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

# the command line is starting: a Ctrl-C now exits 130 quietly (cli.entry restores Ctrl-C)
if getattr(sys, "orig_argv", [])[1:3] == ["-m", "workbench"]:
    import os as _os
    import signal as _signal

    _signal.signal(_signal.SIGINT, lambda *_: _os._exit(130))


def lazy_exports(
    package: str, namespace: dict, exports: dict[str, str]
) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package``: a name in ``exports`` (name -> its module's full
    name) loads its module on first use, which keeps ``import workbench`` light."""

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


__version__ = "0.1.0"

_EXPORTS = {
    "Pipeline": "workbench.pipeline",
    "Stage": "workbench.pipeline",
    "load_factory": "workbench.pipeline",
    "PipelineConfig": "workbench.config",
    "profile": "workbench.runner",
    "compare": "workbench.interleave",
    "Run": "workbench.record",
    "load_run": "workbench.record",
    "stage_summary": "workbench.analysis.budget",
    "budget": "workbench.analysis.budget",
    "WorkbenchError": "workbench.errors",
    "ConfigError": "workbench.errors",
    "PrecisionError": "workbench.errors",
    "PipelineError": "workbench.errors",
    "RunRecordError": "workbench.errors",
    "TraceError": "workbench.errors",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
