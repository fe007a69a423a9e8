"""The tabular example served with its features in a real Redis and the prediction cache on,
driven from a separate process: the joined budget has network, the cache stages and hydrate."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "examples")
)  # redis_helpers lives beside the example tests

from redis_helpers import start_redis  # noqa: E402
from served_helpers import Served, workbench  # noqa: E402
from workbench.examples import data_file  # noqa: E402
from workbench_redis.feature_store import load_redis  # noqa: E402
from workbench.record import load_run  # noqa: E402


@pytest.fixture
def redis_url(tmp_path):
    proc, url = start_redis(tmp_path)
    load_redis(data_file("features.sqlite"), url)
    yield url
    proc.terminate()
    proc.wait(30)


def test_served_tabular_on_redis_with_a_cache(redis_url, tmp_path):
    server = Served(
        tmp_path / "server",
        "--example",
        "tabular",
        "--option",
        "store=redis",
        "--option",
        f"redis_url={redis_url}",
        "--option",
        "cache=lru",
        "--option",
        "n_keys=30",
        "--threads",
        "1",
        "--max-batch-size",
        "4",
        pipeline=None,
    )
    try:
        res = workbench(
            "load",
            "--url",
            server.url,
            "--example",
            "tabular",
            "--option",
            "n_keys=30",
            "--rate",
            40,
            "--requests",
            60,
            "--json",
            "--out",
            tmp_path / "client",
        )
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert out["failed"] == 0 and out["requests"] == 60 and out["server_timing"] is True
        client = load_run(tmp_path / "client")
        assert client.stage_names == [
            "network",
            "ingress",
            "batch_wait",
            "queue_wait",
            "parse",
            "cache_lookup",
            "hydrate",
            "preprocess",
            "forward",
            "postprocess",
            "cache_store",
            "serialize",
            "handoff",
            "egress",
        ]
        assert client.meta.config.options["store"] == "redis"
    finally:
        code, stdout, stderr = server.stop()
    assert code == 0, stderr
    run = load_run(tmp_path / "server")
    assert (
        len(run.requests) == 65 and run.requests["ok"].all()
    )  # 5 warm-up requests of the client + 60
    # cache_hit: per request, the fraction of its batch's items the cache answered; the same on both sides
    cache = run.meta.serving.cache
    assert cache["hits"] + cache["misses"] >= 65 and run.requests["cache_hit"].between(0, 1).all()
    by_id = run.requests.set_index("request_id")["cache_hit"]
    assert (
        client.requests["cache_hit"].tolist()
        == by_id.loc[client.requests["request_id"]].round(6).tolist()
    )
    assert client.requests["cache_hit"].mean() > 0.3  # 30 Zipf keys over 65 requests repeat
