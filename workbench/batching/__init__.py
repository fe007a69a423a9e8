"""Dynamic batching under load: a live batcher, a load generator and a queueing simulator.

Collect -> record -> analyse, as elsewhere in the workbench:

- ``arrivals``: open-loop arrival schedules (Poisson, bursty on/off, replayed CSV).
- ``policy``: the dispatch rule (size, oldest request's wait, one-deep handoff).
- ``batcher``, ``loadgen``, ``live``: the live run (threads, in-process) -> a ``Run`` of kind ``load``.
- ``service_model``: service time per batch size, from profiler runs.
- ``simulator``, ``sweeps``, ``summary``: the simulator and the tables it produces.
- ``continuous``, ``continuous_live``: continuous batching of a generative pipeline's tokens (the
  token-level rule, its simulator with goodput, and the live run ``load`` uses).

Nothing here imports torch; the live run reaches it only through the pipeline.
"""

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
