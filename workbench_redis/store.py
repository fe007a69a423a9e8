"""The tabular example's ``store=redis``: its ``hydrate`` over Redis, the same rows as the SQLite store."""

from __future__ import annotations

from workbench.examples.tabular import Request, _context_features, _set_moments, feature_row

from .feature_store import RedisFeatureStore


class RedisStore:
    """``hydrate`` over :class:`~workbench_redis.feature_store.RedisFeatureStore` (same rows as SQLite)."""

    def __init__(self, url: str):
        self.redis = RedisFeatureStore(url)
        _set_moments(
            self, self.redis.feature_stats, f"Redis at {url}", "reload with scripts/make_data.py"
        )

    def counts(self) -> tuple[int, int]:
        return self.redis.counts()

    def version(self) -> str:
        return f"redis:{self.redis.version.decode(errors='replace')}"

    def hydrate(self, requests: list[Request]) -> tuple[list[Request], list[list[float]]]:
        users, items, stats, cross = self.redis.lookup(requests)
        rows = []
        for req, user in zip(requests, users):
            context = _context_features(req)
            for item_id in req.item_ids:
                item = items[item_id]
                rows.append(
                    feature_row(
                        self,
                        user,
                        item,
                        stats.get(item_id) if item else None,
                        cross.get((req.user_id, int(item[0]))) if item else None,
                        context,
                    )
                )
        return requests, rows
