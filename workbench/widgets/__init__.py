"""Interactive explorers for JupyterLab and Voila (import explicitly: ``import workbench.widgets``).

- :class:`LatencyExplorer`: a pipeline's configuration -> budget, tail, distribution, latency over
  the run and flame graph of a small profiling run or a matching recorded one; "pin as A, compare
  with B" (interleaved, with intervals and verdicts).
- :class:`TraceExplorer`: a picked or uploaded ``torch.profiler`` trace -> launch, transfer, GPU
  timeline, step and flame views.
- :class:`BatchingExplorer`: rate, max batch size and max wait -> simulated dynamic batching.
- :class:`GenerativeExplorer`: continuous batching's knobs -> simulated TTFT, ITL and goodput,
  with recorded live runs beside the curve.

Each explorer is a :class:`~workbench.widgets.controller.Controller` (one debounced job at a time,
cancel, an LRU cache, errors in the message line) with a ``view`` widget to display. Code moves its
controls with ``explorer.set(...)``; ``explorer.wait()`` blocks until the figures are current.
``import workbench`` never imports this package (it needs ipywidgets and plotly).
"""

from __future__ import annotations

try:
    import ipywidgets  # noqa: F401
    import plotly  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the ui extra
    raise ImportError(
        f"workbench.widgets needs ipywidgets and plotly ({exc.name} is missing): "
        "pip install 'workbench[ui]' or run `make dashboard` once"
    ) from exc

from .batching import BatchingExplorer, GenerativeExplorer
from .controller import JobQueue, LRUCache
from .latency import LatencyExplorer
from .latency_support import LiveRuns
from .panes import FigurePane, MessageLine
from .summaries import RunView
from .traces import TraceExplorer, trace_choices
