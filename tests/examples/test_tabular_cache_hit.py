"""The tabular example's prediction cache reports cache_hit per request through describe=."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from workbench import PipelineConfig, profile  # noqa: E402
from workbench.analysis.budget import cache_split  # noqa: E402


def test_profile_records_cache_hit_and_splits_the_budget():
    config = PipelineConfig(batch_size=2, threads=1, options={"cache": "lru", "n_keys": 20})
    run = profile("tabular", config, requests=60, warmup=2, traced=0)
    hits = run.requests["attr.cache_hit"].astype(float)
    assert (
        hits.between(0, 1).all() and hits.iloc[0] == 0.0 and hits.iloc[-20:].mean() > 0.5
    )  # empty cache first
    assert run.meta.attributes.stages == {"cache_lookup": ["cache_hit"]}
    parts = cache_split(run)
    assert len(parts["hit"].requests) + len(parts["miss"].requests) == len(run.requests)
    assert set(parts["hit"].requests["attr.cache_hit"].astype(float)) == {1.0}
