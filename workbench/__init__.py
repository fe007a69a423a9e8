"""Inference Latency Workbench: where each request's time goes, stage by stage.

``import workbench`` is light: it imports neither torch, plotly nor ipywidgets.
Names below load their module on first use (Voila starts a fresh kernel for
every visitor, so start-up time matters).
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Pipeline": "workbench.pipeline",
    "Stage": "workbench.pipeline",
    "load_factory": "workbench.pipeline",
    "PipelineConfig": "workbench.config",
    "profile": "workbench.runner",
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


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
