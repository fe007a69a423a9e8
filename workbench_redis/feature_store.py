"""The tabular example's features in Redis: loading them from the SQLite store, and point lookups.

Both stores hold the same features (``scripts/make_data.py --redis-url URL``
writes SQLite and copies it here row for row). Keys, under ``PREFIX``::

    user:{user_id}            "age_bucket,tenure_days,sessions_7d,purchases_30d,avg_basket"
    item:{item_id}            "category_id,price,rating,age_days"
    stats:{item_id}           "impressions_7d,clicks_7d,add_to_cart_7d"
    ucat:{user_id}:{category} "affinity,last_seen_days"
    feature_stats (hash)      name -> "mean,std"
    meta (hash)               users, items, schema_version
    version                   "SCHEMA:LOAD_ID", written last by each load

The ``version`` key says the features are there and which load they are:
every lookup reads it in its first round trip, and a Redis restarted empty
(no key) or reloaded since the pipeline was built (another load id) is a
:class:`FeatureStoreLost` failure of the request, never an answer built from
default features.

Values are Python ``repr`` of the SQLite values, so floats round-trip
exactly. A hydrate costs two round trips per pipeline call (users and items
with ``MGET`` in one pipeline, then item stats and affinities), as a real
online store client batches them.

Redis absent when asked for is a PipelineError saying how to install, start
or point to one; never a silent fall back to SQLite.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from workbench.errors import PipelineError
from workbench.examples._prediction_cache import PREFIX
import uuid

VERSION_KEY = f"{PREFIX}version"
TABLES = {
    "user": (
        "SELECT user_id, age_bucket, tenure_days, sessions_7d, purchases_30d, avg_basket FROM users",
        1,
    ),
    "item": ("SELECT item_id, category_id, price, rating, age_days FROM items", 1),
    "stats": ("SELECT item_id, impressions_7d, clicks_7d, add_to_cart_7d FROM item_stats", 1),
    "ucat": ("SELECT user_id, category_id, affinity, last_seen_days FROM user_category", 2),
}
HINT = (
    "install it (Debian: apt-get install redis-server; `make test` does it as root), start one "
    "(redis-server --port 6379), or point --option redis_url=redis://HOST:PORT/DB at an existing one"
)


class FeatureStoreLost(RuntimeError):
    """Redis no longer holds the features the pipeline was built on (restarted empty, or reloaded)."""


def connect(url: str):
    """A redis-py client that answered PING, or a PipelineError with the install/point-to hint."""
    try:
        import redis
    except ImportError:  # pragma: no cover - pinned in requirements.lock
        raise PipelineError(
            "the redis package is missing: pip install redis (pinned in requirements.lock)"
        ) from None
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=10)
        client.ping()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ValueError) as exc:
        raise PipelineError(f"Redis at {url} is not reachable ({exc}); {HINT}") from None
    return client


def _encode(values) -> str:
    return ",".join(repr(v) for v in values)


def _decode(raw: bytes | None) -> list[float] | None:
    return None if raw is None else [float(v) for v in raw.split(b",")]


def load_redis(sqlite_path: str | Path, url: str) -> dict[str, int]:
    """Copy the SQLite feature store into Redis (replacing earlier keys); returns keys written per kind.

    The ``version`` key is written last, so a reader never takes a half-done load for features.
    """
    client = connect(url)
    conn = sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True)
    try:
        old = list(client.scan_iter(f"{PREFIX}*", count=10_000))
        for k in range(0, len(old), 10_000):
            client.delete(*old[k : k + 10_000])
        counts = {}
        for kind, (sql, n_key) in TABLES.items():
            rows = conn.execute(sql).fetchall()
            pipe = client.pipeline(transaction=False)
            for row in rows:
                key = f"{PREFIX}{kind}:" + ":".join(str(v) for v in row[:n_key])
                pipe.set(key, _encode(row[n_key:]))
            pipe.execute()
            counts[kind] = len(rows)
        stats = {
            n: _encode((m, s))
            for n, m, s in conn.execute("SELECT name, mean, std FROM feature_stats")
        }
        client.hset(f"{PREFIX}feature_stats", mapping=stats)
        version = dict(conn.execute("SELECT key, value FROM meta").fetchall()).get(
            "schema_version", "?"
        )
        client.hset(
            f"{PREFIX}meta",
            mapping={"users": counts["user"], "items": counts["item"], "schema_version": version},
        )
        client.set(VERSION_KEY, f"{version}:{uuid.uuid4().hex}")
    finally:
        conn.close()
    return counts


class RedisFeatureStore:
    """The tabular example's feature lookups against Redis (the SQLite store's interface)."""

    def __init__(self, url: str):
        self.url = url
        self.client = connect(url)
        meta = self.client.hgetall(f"{PREFIX}meta")
        self.version = self.client.get(VERSION_KEY)
        if not meta or self.version is None:
            raise PipelineError(
                f"Redis at {url} holds no tabular features (no {VERSION_KEY} key); load them with "
                f"python scripts/make_data.py --redis-url {url}"
            )
        self._counts = int(meta[b"users"]), int(meta[b"items"])
        raw = self.client.hgetall(f"{PREFIX}feature_stats")
        self.feature_stats = {k.decode(): _decode(v) for k, v in raw.items()}  # name -> [mean, std]

    def counts(self) -> tuple[int, int]:
        return self._counts

    def lookup(self, requests: list[Any]) -> tuple[list, dict, dict, dict]:
        """Users (per request), items, item stats and affinities: two round trips."""
        item_ids = sorted({i for r in requests for i in r.item_ids})
        first = self.client.pipeline(transaction=False)
        first.mget([f"{PREFIX}user:{r.user_id}" for r in requests] or ["-"])
        first.mget([f"{PREFIX}item:{i}" for i in item_ids] or ["-"])
        first.get(VERSION_KEY)
        users_raw, items_raw, version = first.execute()
        if version != self.version:
            raise FeatureStoreLost(
                f"Redis at {self.url}: the feature store's {VERSION_KEY} key is "
                + (
                    "missing (Redis restarted empty?); reload with python scripts/make_data.py --redis-url "
                    f"{self.url}"
                    if version is None
                    else f"{version.decode(errors='replace')[:60]}, not the {self.version.decode(errors='replace')[:60]} "
                    "this pipeline was built on (reloaded since): restart the server"
                )
            )
        items = {i: _decode(v) for i, v in zip(item_ids, items_raw)}
        known = [i for i in item_ids if items[i] is not None]
        pairs = sorted(
            {
                (r.user_id, int(items[i][0]))
                for r in requests
                for i in r.item_ids
                if items[i] is not None
            }
        )
        second = self.client.pipeline(transaction=False)
        second.mget([f"{PREFIX}stats:{i}" for i in known] or ["-"])
        second.mget([f"{PREFIX}ucat:{u}:{c}" for u, c in pairs] or ["-"])
        stats_raw, cross_raw = second.execute()
        stats = dict(zip(known, map(_decode, stats_raw)))
        cross = dict(zip(pairs, map(_decode, cross_raw)))
        return [_decode(v) for v in users_raw][: len(requests)], items, stats, cross
