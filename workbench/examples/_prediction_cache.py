"""The tabular example's prediction cache: an in-process LRU, optionally in front of Redis.

``cache=redis`` puts Redis (``wb:tabular:pred:{key}``, shared by every server process) behind the
LRU; a Redis hit is copied into it. The key is the model's fingerprint, then what of the request
determines the response; an entry that differs or does not decode is a miss (``mismatched``).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

PREFIX = "wb:tabular:"  # the Redis keys of the tabular example (its features and this cache)

KINDS = ("none", "lru", "redis")


def cache_key(req) -> str:
    """What of a request determines its response (the cache adds the model's fingerprint in front)."""
    return f"{req.user_id}|{','.join(map(str, req.item_ids))}|{req.hour}|{req.device}"


def _answers(entry, req, fingerprint: str) -> bool:
    """Whether a cached entry is this model's response to this request (user and candidates)."""
    if not (
        isinstance(entry, dict)
        and entry.get("fingerprint") == fingerprint
        and entry.get("user_id") == req.user_id
        and isinstance(entry.get("items"), list)
    ):
        return False
    ids = [i.get("item_id") if isinstance(i, dict) else None for i in entry["items"]]
    return all(type(i) is int for i in ids) and sorted(ids) == sorted(req.item_ids)


@dataclass
class Lookup:
    """One pipeline call through the cache: its requests, their cached responses (None: a miss)."""

    requests: list
    cached: list
    misses: list
    fresh: list = field(default_factory=list)

    @property
    def hit_fraction(self) -> float:
        return 1.0 - len(self.misses) / len(self.requests) if self.requests else 0.0

    def responses(self) -> list[dict]:
        """All responses in request order, cached and fresh."""
        fresh = iter(self.fresh)
        return [
            {"request_id": r.request_id, **c} if c is not None else next(fresh)
            for r, c in zip(self.requests, self.cached)
        ]


class PredictionCache:
    """LRU of ``size`` responses, with an optional Redis level (a redis-py client)."""

    def __init__(self, size: int, redis_client=None, fingerprint: str = ""):
        self.size, self.redis, self.fingerprint = size, redis_client, fingerprint
        self._lru: OrderedDict[str, dict] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.mismatched = 0
        self.batch_hit_fractions: list[float] = []
        self._thread = threading.local()

    def key(self, req) -> str:
        return f"{self.fingerprint}|{cache_key(req)}"

    def lookup(self, requests: list) -> Lookup:
        keys = [self.key(r) for r in requests]
        mismatched = 0
        with self._lock:
            cached = [self._lru_get(k) for k in keys]
        lost = [i for i, c in enumerate(cached) if c is None] if self.redis is not None else []
        if lost:
            raw = self.redis.mget([f"{PREFIX}pred:{keys[i]}" for i in lost])
            for i, value in zip(lost, raw):
                cached[i] = None if value is None else _decoded(value)
        for i, (r, c) in enumerate(zip(requests, cached)):
            # never another user's or another model's answer
            if c is not None and not _answers(c, r, self.fingerprint):
                cached[i] = None
                mismatched += 1
        if lost:  # a Redis hit is copied into the LRU
            with self._lock:
                for i in lost:
                    if cached[i] is not None:
                        self._lru_put(keys[i], cached[i])
        out = Lookup(
            list(requests),
            [None if c is None else _without(c, "fingerprint") for c in cached],
            [r for r, c in zip(requests, cached) if c is None],
        )
        with self._lock:
            self.hits += len(requests) - len(out.misses)
            self.misses += len(out.misses)
            self.mismatched += mismatched
            self.batch_hit_fractions.append(out.hit_fraction)
        self._thread.last = out.hit_fraction
        return out

    def last_hit_fraction(self) -> float | None:
        """The hit fraction of this thread's last lookup (a server's executor reads it a batch)."""
        return getattr(self._thread, "last", None)

    def store(self, lookup: Lookup) -> list[dict]:
        """Put the fresh responses in the cache(s); return all responses in request order."""
        entries = {
            self.key(r): _without(resp, "request_id") | {"fingerprint": self.fingerprint}
            for r, resp in zip(lookup.misses, lookup.fresh)
        }
        if entries:
            with self._lock:
                for k, v in entries.items():
                    self._lru_put(k, v)
            if self.redis is not None:
                self.redis.mset({f"{PREFIX}pred:{k}": json.dumps(v) for k, v in entries.items()})
        return lookup.responses()

    def stats(self) -> dict[str, Any]:
        total = self.hits + self.misses
        return {
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": self.hits / total if total else None,
            "mismatched": self.mismatched,
        }

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


def _without(entry: dict, key: str) -> dict:
    return {k: v for k, v in entry.items() if k != key}


def _decoded(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return {}  # not JSON: a mismatched entry (``_answers`` refuses it)
