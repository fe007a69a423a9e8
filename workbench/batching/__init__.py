"""Dynamic and continuous batching under load: arrival schedules, the dispatch rules, the live
batcher and load generator, and the simulators fitted to measured service and step times (each
module's docstring says which). Nothing here imports torch."""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "Arrivals": "arrivals",
    "read_arrivals_csv": "arrivals",
    "BatchPolicy": "policy",
    "BatchFormer": "policy",
    "dispatch_schedule": "policy",
    "DynamicBatcher": "batcher",
    "run_load": "live",
    "ServiceModel": "service_model",
    "service_model_from_runs": "service_model",
    "Simulation": "simulator",
    "simulate": "simulator",
    "sweep": "sweeps",
    "load_summary": "summary",
    "ContinuousPolicy": "continuous",
    "StepTimes": "continuous",
    "fit_step_times": "continuous",
    "simulate_continuous": "continuous",
    "goodput": "continuous",
    "goodput_knee": "continuous",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(
    __name__, globals(), {k: f"{__name__}.{m}" for k, m in _EXPORTS.items()}
)
