"""Figure builders: tables in, ``plotly.graph_objects.Figure`` out (``import workbench`` never
imports plotly). Each aggregates before plotting, so a figure stays small whatever the run's size;
input without GPU events gives a figure that says so, never an exception.
"""

from .batching import (
    batching_curves_figure,
    generative_figure,
    queueing_breakdown_figure,
    wait_time_figure,
)
from .budget import budget_figure
from .compare_figures import compare_figure, ratio_figure
from .distributions import distribution_figure, survival_figure
from .flame import flame_figure, trace_flame_figure
from .tail import attribute_figure, latency_over_run_figure, tail_figure
from .timeline import gpu_timeline_figure, request_flame_chart, step_breakdown_figure
from .transfers import launch_figure, transfer_figure
