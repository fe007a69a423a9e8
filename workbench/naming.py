"""The one naming contract between the runner and the trace analysis.

The runner wraps every stage of a traced request in
``torch.profiler.record_function(stage_range_name(stage))``; the trace analysis
finds stage ranges with :func:`stage_from_range_name`. Like torch's
``ProfilerStep#N``, the prefix is defined here and nowhere else.
"""

STAGE_PREFIX = "workbench.stage::"


def stage_range_name(stage: str) -> str:
    """The ``record_function`` name of a pipeline stage."""
    return STAGE_PREFIX + stage


def stage_from_range_name(name: str) -> str | None:
    """The stage a trace range belongs to, or None when it is not a stage range."""
    if isinstance(name, str) and name.startswith(STAGE_PREFIX):
        return name[len(STAGE_PREFIX) :]
    return None
