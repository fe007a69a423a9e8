"""Dynamic and continuous batching under load: arrival schedules, the dispatch rules, the live
batcher and load generator, and the simulators fitted to measured service and step times (each
module's docstring says which). Nothing here imports torch."""

from __future__ import annotations

from .. import lazy_exports

_MODULES = {  # module: the names it exports
    "arrivals": "Arrivals read_arrivals_csv",
    "policy": "BatchPolicy BatchFormer DynamicBatcher",
    "live": "run_load",
    "service_model": "ServiceModel service_model_from_runs",
    "simulator": "Simulation simulate sweep",
    "summary": "load_summary",
    "continuous": "ContinuousPolicy StepTimes fit_step_times simulate_continuous goodput "
    "goodput_knee",
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names.split()}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(
    __name__, globals(), {k: f"{__name__}.{m}" for k, m in _EXPORTS.items()}
)
