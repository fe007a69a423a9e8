"""The Redis wing: the tabular example's features in Redis (``store=redis``) and its shared
prediction cache (``cache=redis``). Installed with ``pip install -e '.[redis]'``; the core reaches it
only through the ``workbench.wings`` entry point (:func:`workbench.wings.wing`).
"""

from __future__ import annotations

from .feature_store import FeatureStoreLost, RedisFeatureStore, connect, load_redis
from .store import RedisStore

__all__ = ["FeatureStoreLost", "RedisFeatureStore", "RedisStore", "connect", "load_redis"]
