"""workbench.examples._course: the measurements notebooks 11 and 12 make live and scripts/record_course_data.py
records."""

from __future__ import annotations

import pytest

from workbench.examples import _course


def test_local_redis_says_none_where_redis_server_is_not_installed(monkeypatch):
    monkeypatch.setattr(_course.shutil, "which", lambda name: None)
    with _course.local_redis() as url:
        assert url is None


@pytest.mark.slow
def test_cache_levels_redis_answers_a_superset_of_the_lru_hits():
    """Both levels see the same seeded keys and the LRU is filled the same way, so Redis can only add hits."""
    if _course.shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed (make test installs Debian's redis-server as root)")
    with _course.local_redis() as url:
        result = _course.cache_levels(url, l1_size=20, requests=60, warmup=5)
    lru, both = result["levels"]["lru"], result["levels"]["redis"]
    assert (result["l1_size"], result["requests"], result["keys"]) == (20, 60, _course.CACHE_MIX)
    assert both["hit_rate"] > lru["hit_rate"]  # 500 Zipf keys overflow an LRU of 20
    for level in (lru, both):
        assert level["misses"] == round(60 * (1 - level["hit_rate"]))


def test_snapshot_pipeline_starts_one_snapshot_thread_that_stop_background_jobs_ends():
    import threading

    from workbench import PipelineConfig

    config = PipelineConfig(options={"period_ms": 40, "hold_ms": 10, "records": 50, "churn": 2})
    pipe = _course.snapshot_pipeline(config)
    try:
        assert pipe.stage_names == ["parse", "lookup", "score"]
        assert pipe([3, 5_004]) == [21.0, 28.0]  # the table's value of each key (key % 5,000) * 7
        assert [t.name for t in threading.enumerate()].count("snapshot") == 1
    finally:
        stopped = _course.stop_background_jobs()
    assert stopped == 1 and "snapshot" not in [t.name for t in threading.enumerate()]
    assert _course.stop_background_jobs() == 0
