"""workbench_redis.course: notebook 12's cache levels and the throwaway redis-server they use."""

from __future__ import annotations

import pytest

from workbench_redis import course


def test_local_redis_says_none_where_redis_server_is_not_installed(monkeypatch):
    monkeypatch.setattr(course.shutil, "which", lambda name: None)
    with course.local_redis() as url:
        assert url is None


@pytest.mark.slow
def test_cache_levels_redis_answers_a_superset_of_the_lru_hits():
    """Both levels see the same seeded keys and the LRU is filled the same way, so Redis can only add hits."""
    if course.shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed (make test installs Debian's redis-server as root)")
    with course.local_redis() as url:
        result = course.cache_levels(url, l1_size=20, requests=60, warmup=5)
    lru, both = result["levels"]["lru"], result["levels"]["redis"]
    assert (result["l1_size"], result["requests"], result["keys"]) == (20, 60, course.CACHE_MIX)
    assert both["hit_rate"] > lru["hit_rate"]  # 500 Zipf keys overflow an LRU of 20
    for level in (lru, both):
        assert level["misses"] == round(60 * (1 - level["hit_rate"]))
