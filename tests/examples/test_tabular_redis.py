"""The tabular example with Redis: the same features as SQLite, the prediction cache, Redis absent."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from redis_helpers import start_redis
from workbench.config import PipelineConfig
from workbench.errors import ConfigError, PipelineError
from workbench.examples import data_file, tabular
import workbench_redis
from workbench_redis.feature_store import PREFIX, FeatureStoreLost, connect, load_redis
from workbench.examples._prediction_cache import cache_key

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    proc, url = start_redis(tmp_path_factory.mktemp("redis"))
    load_redis(data_file("features.sqlite"), url)
    yield url
    proc.terminate()
    proc.wait(30)


def requests(n, **kw):
    return tabular.parse(list(itertools.islice(tabular.request_items(0, 5000, 2000, **kw), n)))


def test_redis_holds_the_same_features_as_sqlite(redis_url):
    sqlite, redis = (
        tabular.FeatureStore(data_file("features.sqlite")),
        workbench_redis.RedisStore(redis_url),
    )
    assert (redis.mean, redis.std, redis.counts()) == (sqlite.mean, sqlite.std, sqlite.counts())
    reqs = requests(300)  # ~2 % unknown users and items among them
    assert redis.hydrate(reqs)[1] == sqlite.hydrate(reqs)[1]


def test_store_redis_pipeline_gives_the_sqlite_pipeline_output(redis_url, one_thread):
    config = dict(batch_size=4)
    a = tabular.build(PipelineConfig(**config, options={"store": "redis", "redis_url": redis_url}))
    b = tabular.build(PipelineConfig(**config))
    items = list(itertools.islice(a.item_iterator(), 40))
    assert [a(items[k : k + 4]) for k in range(0, 40, 4)] == [
        b(items[k : k + 4]) for k in range(0, 40, 4)
    ]


def expected_hits(keys, size):
    """Hits of an LRU of ``size`` entries over the key sequence, counted independently of the cache."""
    recent, hits = [], 0
    for k in keys:
        if k in recent:
            hits += 1
            recent.remove(k)
        recent.append(k)
        recent = recent[-size:] if size else []
    return hits


@pytest.mark.parametrize("size", [10_000, 3, 0])
def test_lru_cache_hit_rate_on_zipf_keys(size, one_thread):
    pipe = tabular.build(
        PipelineConfig(batch_size=1, options={"cache": "lru", "n_keys": 20, "cache_size": size})
    )
    plain = tabular.build(PipelineConfig(batch_size=1, options={"n_keys": 20}))
    items = list(itertools.islice(pipe.item_iterator(), 200))
    assert [pipe([x]) for x in items] == [
        plain([x]) for x in items
    ]  # hits answer what the model would
    hits = expected_hits([cache_key(r) for r in tabular.parse(items)], size)
    assert pipe.cache.stats() == {
        "hits": hits,
        "misses": 200 - hits,
        "hit_rate": hits / 200,
        "mismatched": 0,
    }
    assert pipe.cache.batch_hit_fractions.count(1.0) == hits
    if size == 10_000:
        assert hits == 200 - len({cache_key(r) for r in tabular.parse(items)})
    assert pipe.stage_names == [
        "parse",
        "cache_lookup",
        "hydrate",
        "preprocess",
        "forward",
        "postprocess",
        "cache_store",
        "serialize",
    ]


def test_redis_cache_level_is_shared_between_processes_lrus(redis_url, one_thread):
    options = {"cache": "redis", "redis_url": redis_url, "n_keys": 10, "cache_size": 100}
    first = tabular.build(PipelineConfig(batch_size=4, options=options))
    items = list(itertools.islice(first.item_iterator(), 40))
    for k in range(0, 40, 4):
        first(items[k : k + 4])
    second = tabular.build(PipelineConfig(batch_size=4, options=options))  # empty LRU, same Redis
    out = second(items[:4])
    assert second.cache.stats() == {"hits": 4, "misses": 0, "hit_rate": 1.0, "mismatched": 0}
    assert [json.loads(o)["request_id"] for o in out] == [
        json.loads(x)["request_id"] for x in items[:4]
    ]


def test_redis_absent_is_one_line_and_never_sqlite():
    for options in ({"store": "redis"}, {"cache": "redis"}):
        with pytest.raises(PipelineError) as err:
            tabular.build(PipelineConfig(options={**options, "redis_url": "redis://127.0.0.1:1/0"}))
        message = str(err.value)
        assert "\n" not in message and message.startswith(
            "Redis at redis://127.0.0.1:1/0 is not reachable"
        )
        assert "apt-get install redis-server" in message and "--option redis_url=" in message


def test_bad_cache_options_name_the_option():
    with pytest.raises(ConfigError, match="option 'cache' must be one of none, lru, redis"):
        tabular.build(PipelineConfig(options={"cache": "memcached"}))
    with pytest.raises(ConfigError, match="option 'store' must be sqlite or redis"):
        tabular.build(PipelineConfig(options={"store": "postgres"}))


def test_make_data_loads_both_stores_from_one_script(tmp_path):
    proc, url = start_redis(tmp_path)
    try:
        res = subprocess.run(
            [
                sys.executable,
                str(REPO / "scripts" / "make_data.py"),
                "--out",
                str(tmp_path / "d"),
                "--redis-url",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, res.stderr
        assert res.stdout.splitlines()[-1] == (
            f"{url}: 5000 user, 2000 item, 2000 stats, 20000 ucat keys from "
            f"{tmp_path / 'd' / 'features.sqlite'}"
        )
        sqlite = tabular.FeatureStore(tmp_path / "d" / "features.sqlite")
        reqs = requests(50)
        assert workbench_redis.RedisStore(url).hydrate(reqs)[1] == sqlite.hydrate(reqs)[1]
    finally:
        proc.terminate()
        proc.wait(30)
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "make_data.py"),
            "--out",
            str(tmp_path / "d"),
            "--redis-url",
            "redis://127.0.0.1:1/0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        res.returncode == 2
        and res.stderr.count("\n") == 1
        and "apt-get install redis-server" in res.stderr
    )


def test_a_redis_restarted_empty_or_reloaded_is_a_named_failure_not_default_features(
    tmp_path, one_thread
):
    proc, url = start_redis(tmp_path)
    try:
        load_redis(data_file("features.sqlite"), url)
        pipe = tabular.build(
            PipelineConfig(batch_size=2, options={"store": "redis", "redis_url": url})
        )
        items = list(itertools.islice(pipe.item_iterator(), 2))
        assert len(pipe(items)) == 2
        connect(url).flushall()  # what a restart with --save '' leaves
        with pytest.raises(
            FeatureStoreLost, match="version key is missing \\(Redis restarted empty\\?\\)"
        ):
            pipe(items)
        load_redis(data_file("features.sqlite"), url)  # another load: another version
        with pytest.raises(FeatureStoreLost, match="reloaded since"):
            pipe(items)
        with pytest.raises(PipelineError, match="no wb:tabular:version key"):
            connect(url).delete(f"{PREFIX}version")
            workbench_redis.RedisStore(url)
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_cached_answer_of_another_user_or_model_is_a_miss(redis_url, one_thread):
    options = {"cache": "redis", "redis_url": redis_url, "n_keys": 5, "cache_size": 100, "seed": 7}
    pipe = tabular.build(PipelineConfig(batch_size=1, options=options))
    plain = tabular.build(PipelineConfig(batch_size=1, options={"n_keys": 5, "seed": 7}))
    item = next(pipe.item_iterator())
    req = tabular.parse([item])[0]
    key = f"{PREFIX}pred:{pipe.cache.key(req)}"
    client = connect(redis_url)
    forged = {
        "user_id": 999999,
        "items": [{"item_id": i, "score": 1.0, "show": True} for i in req.item_ids],
        "fingerprint": pipe.cache.fingerprint,
    }
    client.set(key, json.dumps(forged))
    assert pipe([item]) == plain([item])  # the model's own answer, not the other user's
    assert pipe.cache.stats()["mismatched"] == 1 and pipe.cache.stats()["hits"] == 0
    other = tabular.build(
        PipelineConfig(batch_size=1, options={**options, "seed": 8})
    )  # another model
    assert other.cache.fingerprint != pipe.cache.fingerprint
    assert other.cache.key(req) != pipe.cache.key(req)
    # this user's entry, but made by another model (its fingerprint), under the other model's key: a miss
    client.set(
        f"{PREFIX}pred:{other.cache.key(req)}", json.dumps({**forged, "user_id": req.user_id})
    )
    other([item])
    assert other.cache.stats()["mismatched"] == 1
    third = tabular.build(
        PipelineConfig(batch_size=1, options={**options, "seed": 8})
    )  # an empty LRU
    client.set(f"{PREFIX}pred:{third.cache.key(req)}", b"not json")
    third([item])
    assert third.cache.stats()["mismatched"] == 1
    assert (
        pipe([item]) == plain([item]) and pipe.cache.stats()["hits"] == 1
    )  # its own entry now hits


def test_a_non_finite_score_is_a_named_failure_never_invalid_json(tmp_path, one_thread):
    proc, url = start_redis(tmp_path)
    try:
        load_redis(data_file("features.sqlite"), url)
        pipe = tabular.build(
            PipelineConfig(batch_size=1, options={"store": "redis", "redis_url": url})
        )
        item = next(pipe.item_iterator())
        user = tabular.parse([item])[0].user_id
        connect(url).set(f"{PREFIX}user:{user}", "nan,1.0,1.0,1.0,1.0")
        with pytest.raises(
            tabular.NonFiniteOutput, match="is nan \\(a feature that is not a finite number\\?\\)"
        ):
            pipe([item])
    finally:
        proc.terminate()
        proc.wait(30)
    with pytest.raises(ValueError):
        tabular.serialize([{"score": float("nan")}])
