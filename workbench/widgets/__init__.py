"""Interactive explorers for JupyterLab and Voila (``import workbench.widgets``: needs ipywidgets).

Each explorer has a ``view`` widget to display; ``explorer.set(...)`` moves its controls and
``explorer.wait()`` blocks until the figures are current.
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
