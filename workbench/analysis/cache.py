"""A run split by the prediction cache: the requests it answered whole, and the rest."""

from __future__ import annotations

from ..errors import ConfigError
from ..record import Run


def cache_split(run) -> dict:
    """``{"hit": Run, "miss": Run}``: the requests whose whole batch hit a prediction cache
    (``cache_hit``: the fraction it answered), and the rest; each keeps the run's meta."""
    # served runs carry ``cache_hit``; profile runs the describe= attribute ``attr.cache_hit``
    present = [c for c in ("cache_hit", "attr.cache_hit") if c in run.requests.columns]
    column = next((c for c in present if not run.requests[c].isna().all()), None)
    if column is None:
        raise ConfigError(
            f"{run.path or run.label}: no cache_hit column (runs of the tabular example with "
            "--option cache=lru or cache=redis have one)"
        )
    hit = run.requests[column].astype("float64").fillna(0.0) >= 1.0
    parts = {}
    for name, mask in (("hit", hit), ("miss", ~hit)):
        req = run.requests[mask].reset_index(drop=True)
        parts[name] = Run(
            meta=run.meta,
            requests=req,
            stages=run.stages[run.stages["request"].isin(req["request"])],
        )
    return parts
