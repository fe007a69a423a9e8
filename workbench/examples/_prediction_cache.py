"""The tabular example's prediction cache: an in-process LRU, optionally in front of Redis.

``cache=lru``: ``cache_size`` responses in this process (an ``OrderedDict``,
least recently used evicted). ``cache=redis``: the same LRU, then Redis
(``wb:tabular:pred:{key}``, shared by every server process); a Redis hit is
copied into the LRU. The key is what determines the response: user, candidate
items, hour and device (not the request id). Counters say how many items hit
and missed; ``batch_hit_fractions`` keeps, per pipeline call, the fraction of
its items that hit (the per-request ``cache_hit`` attribute).
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ._feature_redis import PREFIX

KINDS = ("none", "lru", "redis")


def cache_key(req) -> str:
    return f"{req.user_id}|{','.join(map(str, req.item_ids))}|{req.hour}|{req.device}"


@dataclass
class Lookup:
    """One pipeline call through the cache: its requests, the cached responses (None: a miss), the misses."""

    requests: list
    cached: list
    misses: list
    fresh: list = field(default_factory=list)

    @property
    def hit_fraction(self) -> float:
        return 1.0 - len(self.misses) / len(self.requests) if self.requests else 0.0

    def responses(self) -> list[dict]:
        """All responses in request order: the cached ones (with this request's id) and the fresh ones."""
        fresh = iter(self.fresh)
        return [{"request_id": r.request_id, **c} if c is not None else next(fresh)
                for r, c in zip(self.requests, self.cached)]


class PredictionCache:
    """LRU of ``size`` responses, with an optional Redis level (a redis-py client)."""

    def __init__(self, size: int, redis_client=None):
        self.size, self.redis = size, redis_client
        self._lru: OrderedDict[str, dict] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        self.batch_hit_fractions: list[float] = []
        self._thread = threading.local()

    def lookup(self, requests: list) -> Lookup:
        keys = [cache_key(r) for r in requests]
        with self._lock:
            cached = [self._lru_get(k) for k in keys]
        if self.redis is not None:
            lost = [i for i, c in enumerate(cached) if c is None]
            if lost:
                raw = self.redis.mget([f"{PREFIX}pred:{keys[i]}" for i in lost])
                with self._lock:
                    for i, value in zip(lost, raw):
                        if value is not None:
                            cached[i] = json.loads(value)
                            self._lru_put(keys[i], cached[i])
        out = Lookup(list(requests), cached, [r for r, c in zip(requests, cached) if c is None])
        with self._lock:
            self.hits += len(requests) - len(out.misses)
            self.misses += len(out.misses)
            self.batch_hit_fractions.append(out.hit_fraction)
        self._thread.last = out.hit_fraction
        return out

    def last_hit_fraction(self) -> float | None:
        """The hit fraction of the last lookup made on this thread (a server's executor reads it per batch)."""
        return getattr(self._thread, "last", None)

    def store(self, lookup: Lookup) -> list[dict]:
        """Put the fresh responses in the cache(s); return all responses in request order."""
        entries = {cache_key(r): _keyless(resp) for r, resp in zip(lookup.misses, lookup.fresh)}
        if entries:
            with self._lock:
                for k, v in entries.items():
                    self._lru_put(k, v)
            if self.redis is not None:
                self.redis.mset({f"{PREFIX}pred:{k}": json.dumps(v) for k, v in entries.items()})
        return lookup.responses()

    def stats(self) -> dict[str, Any]:
        total = self.hits + self.misses
        return {"hits": self.hits, "misses": self.misses, "hit_rate": self.hits / total if total else None}

    def _lru_get(self, key: str):
        value = self._lru.get(key)
        if value is not None:
            self._lru.move_to_end(key)
        return value

    def _lru_put(self, key: str, value: dict) -> None:
        self._lru[key] = value
        self._lru.move_to_end(key)
        while len(self._lru) > self.size:
            self._lru.popitem(last=False)


def _keyless(response: dict) -> dict:
    return {k: v for k, v in response.items() if k != "request_id"}
