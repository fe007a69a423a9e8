"""Example ``tabular``: rank candidate items for a user. Feature-bound at small batch.

One item is a JSON request, as bytes: ``{"request_id": "req-000001", "user_id": 42, "item_ids":
[7, 1999, 12], "context": {"hour": 13, "device": "ios"}}``. Stages: ``parse`` (ValueError naming
the field), ``hydrate`` (per request a ``users`` point lookup and per item ``items``,
``item_stats`` and ``user_category`` ones in ``data/features.sqlite``, or in Redis with
``store=redis``; unknown ids get defaults and a flag), ``preprocess`` (z-score, model dtype, to the
device), ``forward`` (a seeded random MLP per (user, item) pair), ``postprocess`` (Platt scaling
``sigmoid(platt_a * logit + platt_b)``, ``show`` when ``>= threshold``, sorted) and ``serialize``.

Options (``config.options``):
    seed (int, 0): weights and request stream.
    hidden (list of int, [256, 128]): MLP hidden sizes (``"256,128"`` works too).
    platt_a (float, 1.5), platt_b (float, -1.0): calibration constants.
    threshold (float, 0.3): show an item when its calibrated score is >= this.
    pin_memory (bool, True): on CUDA, pinned host memory and non_blocking copy.
    store ("sqlite" | "redis", "sqlite"): where hydrate reads features.
    redis_url (str, "redis://127.0.0.1:6379/0"): the Redis of ``store=redis`` and ``cache=redis``.
    cache ("none" | "lru" | "redis", "none"): a prediction cache (``_prediction_cache``); its
        stages ``cache_lookup`` after parse and ``cache_store`` before serialize, and
        hydrate..postprocess see only the items that missed (``pipe.cache.stats()``).
    cache_size (int, 10000): responses the in-process LRU holds.
    n_keys (int, 0): > 0 draws requests from n_keys distinct ones, rank k with probability
        proportional to 1 / k**zipf_s, so a cache can hit.
    zipf_s (float, 1.1): the Zipf exponent of ``n_keys``.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
import random
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..config import PipelineConfig, Range, option_ranges
from ..errors import ConfigError, PipelineError, is_int
from ..pipeline import Pipeline
from ..precision import check_precision, prepare_model, torch_dtype
from ..wings import wing
from . import SEED, check_batch, data_file, example_pipeline, int_list_option, option, to_device
from ._prediction_cache import KINDS, PredictionCache

DEVICES = ("ios", "android", "web")
MAX_CANDIDATES = 100
MAX_ID = 2**63 - 1  # ids are the stores' keys: SQLite's INTEGER is a signed 64-bit number
STORE_FEATURES = tuple(
    f"{table}.{column}"
    for table, columns in {
        "users": ("age_bucket", "tenure_days", "sessions_7d", "purchases_30d", "avg_basket"),
        "items": ("price", "rating", "age_days"),
        "item_stats": ("impressions_7d", "clicks_7d", "add_to_cart_7d"),
        "user_category": ("affinity", "last_seen_days"),
    }.items()
    for column in columns
)
EXTRA_FEATURES = ("user_known", "item_known", "hour_sin", "hour_cos") + tuple(
    f"device_{d}" for d in DEVICES
)
N_FEATURES = len(STORE_FEATURES) + len(EXTRA_FEATURES)

_USER_SQL = "SELECT age_bucket, tenure_days, sessions_7d, purchases_30d, avg_basket FROM users WHERE user_id = ?"
_ITEM_SQL = "SELECT category_id, price, rating, age_days FROM items WHERE item_id = ?"
_STATS_SQL = "SELECT impressions_7d, clicks_7d, add_to_cart_7d FROM item_stats WHERE item_id = ?"
_AFFINITY_SQL = (
    "SELECT affinity, last_seen_days FROM user_category WHERE user_id = ? AND category_id = ?"
)
_MISSING_AFFINITY = (0.0, 365)


@dataclass(frozen=True)
class Request:
    request_id: str
    user_id: int
    item_ids: tuple[int, ...]
    hour: int
    device: str


class FeatureStore:
    """Read-only point lookups in the SQLite feature store, safe to call from a worker thread."""

    def __init__(self, path: Path):
        self.path = path
        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self.lock = threading.Lock()
        stats = self.conn.execute("SELECT name, mean, std FROM feature_stats")
        _set_moments(
            self, {n: (m, s) for n, m, s in stats}, f"{path}", "run `make data` to regenerate it"
        )

    def version(self) -> str:
        """The features' version for the prediction cache's fingerprint: the file's size and change time."""
        st = self.path.stat()
        return f"sqlite:{st.st_size}:{st.st_mtime_ns}"

    def counts(self) -> tuple[int, int]:
        users = self.conn.execute("SELECT count(*) FROM users").fetchone()[0]
        items = self.conn.execute("SELECT count(*) FROM items").fetchone()[0]
        return users, items

    def hydrate(self, requests: list[Request]) -> tuple[list[Request], list[list[float]]]:
        """One feature row per (request, candidate item), in request order."""
        rows: list[list[float]] = []
        with self.lock:
            execute = self.conn.execute
            for req in requests:
                user = execute(_USER_SQL, (req.user_id,)).fetchone()
                context = _context_features(req)
                for item_id in req.item_ids:
                    item = execute(_ITEM_SQL, (item_id,)).fetchone()
                    stats = execute(_STATS_SQL, (item_id,)).fetchone() if item else None
                    cross = (
                        execute(_AFFINITY_SQL, (req.user_id, item[0])).fetchone() if item else None
                    )
                    rows.append(feature_row(self, user, item, stats, cross, context))
        return requests, rows


def _set_moments(store, stats: dict, where: str, fix: str) -> None:
    """``store.mean``/``std`` per feature, and population means as the unknown ids' defaults."""
    missing = [n for n in STORE_FEATURES if n not in stats]
    if missing:
        raise PipelineError(f"{where}: feature_stats lacks {missing}; {fix}")
    store.mean = [stats[n][0] for n in STORE_FEATURES] + [0.0] * len(EXTRA_FEATURES)
    store.std = [stats[n][1] or 1.0 for n in STORE_FEATURES] + [1.0] * len(EXTRA_FEATURES)
    store.user_defaults = tuple(store.mean[0:5])
    store.item_defaults = (-1, *store.mean[5:8])
    store.stats_defaults = tuple(store.mean[8:11])


def feature_row(store, user, item, stats, cross, context: list[float]) -> list[float]:
    """One (user, item) row from the looked-up values (None: not in the store), the same for both stores."""
    return (
        list(user or store.user_defaults)
        + list((item or store.item_defaults)[1:])
        + list(stats or store.stats_defaults)
        + list(cross or _MISSING_AFFINITY)
        + [float(user is not None), float(item is not None)]
        + context
    )


def _context_features(req: Request) -> list[float]:
    angle = 2.0 * math.pi * req.hour / 24.0
    return [math.sin(angle), math.cos(angle)] + [float(req.device == d) for d in DEVICES]


@option_ranges(
    seed=SEED,
    platt_a=Range(-1e6, 1e6),
    platt_b=Range(-1e6, 1e6),
    threshold=Range(0, 1),
    n_keys=Range(0, 100_000, integer=True),
    zipf_s=Range(0, 100),
    cache_size=Range(0, 10**7, integer=True),
)
def build(config: PipelineConfig) -> Pipeline:
    """The tabular pipeline for ``config`` (see the module docstring for stages and options)."""
    import torch  # 1-2 s and 300 MB: only when the pipeline is built

    check_precision(config)  # first: an impossible combination fails before any work
    seed = option(config, "seed", 0)
    hidden = int_list_option(config, "hidden", (256, 128))
    platt_a = option(config, "platt_a", 1.5, float)
    platt_b = option(config, "platt_b", -1.0, float)
    threshold = option(config, "threshold", 0.3, float)
    option(config, "pin_memory", True, bool)
    store, cache = _store_and_cache(config)
    n_keys, zipf_s = option(config, "n_keys", 0, int), option(config, "zipf_s", 1.1, float)
    mean, std = (torch.tensor(v, dtype=torch.float32) for v in (store.mean, store.std))
    n_users, n_items = store.counts()
    torch.manual_seed(seed)
    model = prepare_model(_mlp(N_FEATURES, hidden), config)
    dtype = torch_dtype(config.precision)
    if cache is not None:
        cache.fingerprint = _answer_fingerprint(model, store, config, platt_a, platt_b, threshold)

    def forward(batch):
        requests, x = batch
        with torch.inference_mode():
            return requests, model(x).squeeze(-1)

    def preprocess(hydrated):
        requests, rows = hydrated
        # 0 rows: all hit
        x = (torch.tensor(rows, dtype=torch.float32).reshape(-1, N_FEATURES) - mean) / std
        return requests, to_device(x.to(dtype), config)

    def postprocess(scored):
        requests, logits = scored
        with torch.inference_mode():
            probs = torch.sigmoid(logits.float() * platt_a + platt_b).cpu().tolist()
        return _responses(requests, probs, threshold)

    probe = torch.zeros(2, N_FEATURES, dtype=dtype, device=config.device)
    pipe = example_pipeline(
        "tabular",
        config,
        model,
        lambda: request_items(seed, n_users, n_items, n_keys, zipf_s),
        lambda: forward(([], probe)),
    )
    # cache_lookup's describe=: the fraction of the call's items the prediction cache answered (0..1)
    hit = lambda lookup: {"cache_hit": lookup.hit_fraction}  # noqa: E731
    for name, fn in _stages(store, cache, preprocess, forward, postprocess):
        pipe.add(name, fn, describe=hit if name == "cache_lookup" else None)
    pipe.cache = cache
    pipe.check_item = check_item  # served: each body checked alone before it joins a batch
    return pipe


def check_item(payload) -> None:
    """``parse``'s rules on one request body; ValueError (or RecursionError for absurdly deep JSON)
    names what is wrong, in this request only. ``workbench serve`` runs it before batching."""
    _parse_one(0, payload, where="tabular request")


def _answer_fingerprint(
    model, store, config: PipelineConfig, platt_a: float, platt_b: float, threshold: float
) -> str:
    """16 hex digits of what responses depend on besides the request: the prediction cache's key."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().numpy().tobytes())
    digest.update(repr((platt_a, platt_b, threshold, config.precision, store.version())).encode())
    return digest.hexdigest()[:16]


class NonFiniteOutput(ValueError):
    """A score that is not a finite number (a NaN or infinite feature, an overflow): never sent as JSON."""


def _store_and_cache(config: PipelineConfig):
    """The feature store (SQLite or Redis) and the prediction cache (or None) the options ask for."""
    kind = option(config, "store", "sqlite", str)
    cache_kind = option(config, "cache", "none", str)
    url = option(config, "redis_url", "redis://127.0.0.1:6379/0", str)
    if kind not in ("sqlite", "redis"):
        raise ConfigError(f"option 'store' must be sqlite or redis, got {kind!r}")
    if cache_kind not in KINDS:
        raise ConfigError(f"option 'cache' must be one of {', '.join(KINDS)}, got {cache_kind!r}")
    size = option(config, "cache_size", 10_000, int)
    store = (
        wing("redis").RedisStore(url)
        if kind == "redis"
        else FeatureStore(data_file("features.sqlite"))
    )
    if cache_kind == "none":
        return store, None
    redis_client = None
    if cache_kind == "redis":
        redis_client = store.redis.client if kind == "redis" else wing("redis").connect(url)
    return store, PredictionCache(size, redis_client)


def _stages(store, cache, preprocess, forward, postprocess) -> list:
    """The stages; with a cache, lookup after parse, the model path on the misses only, store before serialize."""
    if cache is None:
        model = [("preprocess", preprocess), ("forward", forward), ("postprocess", postprocess)]
        return [("parse", parse), ("hydrate", store.hydrate), *model, ("serialize", serialize)]

    def hydrate(lookup):
        return lookup, store.hydrate(lookup.misses)[1]

    def postprocess_misses(scored):
        lookup, logits = scored
        lookup.fresh = postprocess((lookup.misses, logits))
        return lookup

    return [
        ("parse", parse),
        ("cache_lookup", cache.lookup),
        ("hydrate", hydrate),
        ("preprocess", preprocess),
        ("forward", forward),
        ("postprocess", postprocess_misses),
        ("cache_store", cache.store),
        ("serialize", serialize),
    ]


def _mlp(n_in: int, hidden: tuple[int, ...]):
    import torch.nn as nn  # loaded with torch by build

    layers, width = [], n_in
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 1))
    return nn.Sequential(*layers)


def parse(batch: list) -> list[Request]:
    """Decode and validate JSON requests; ValueError names the request and the field."""
    return [_parse_one(i, payload) for i, payload in enumerate(check_batch(batch, "tabular"))]


def _parse_one(index: int, payload, where: str | None = None) -> Request:
    where = where or f"tabular request {index}"
    try:
        obj = json.loads(payload)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    user_id, item_ids = obj.get("user_id"), obj.get("item_ids")
    if not _is_id(user_id):
        raise ValueError(f"{where}: user_id must be an integer 0..{MAX_ID}, got {user_id!r}")
    if (
        not isinstance(item_ids, list)
        or not 1 <= len(item_ids) <= MAX_CANDIDATES
        or not all(_is_id(i) for i in item_ids)
    ):
        raise ValueError(
            f"{where}: item_ids must be a list of 1..{MAX_CANDIDATES} integers 0..{MAX_ID}"
        )
    context = obj.get("context", {})
    if not isinstance(context, dict):
        raise ValueError(f"{where}: context must be an object")
    hour, device = context.get("hour", 12), context.get("device", "web")
    if not _is_id(hour) or hour > 23:
        raise ValueError(f"{where}: context.hour must be an integer 0..23, got {hour!r}")
    if device not in DEVICES:
        raise ValueError(
            f"{where}: context.device must be one of {', '.join(DEVICES)}, got {device!r}"
        )
    return Request(str(obj.get("request_id", index)), user_id, tuple(item_ids), hour, device)


def _is_id(value) -> bool:
    return is_int(value) and 0 <= value <= MAX_ID


def _responses(requests: list[Request], probs: list[float], threshold: float) -> list[dict]:
    """One response per request; a score that is not finite raises :class:`NonFiniteOutput` naming it."""
    out, start = [], 0
    for req in requests:
        scores = probs[start : start + len(req.item_ids)]
        start += len(req.item_ids)
        bad = next(((i, s) for i, s in zip(req.item_ids, scores) if not math.isfinite(s)), None)
        if bad is not None:
            raise NonFiniteOutput(
                f"tabular request {req.request_id!r}: the score of item {bad[0]} is {bad[1]} "
                "(a feature that is not a finite number?)"
            )
        ranked = sorted(zip(req.item_ids, scores), key=lambda pair: -pair[1])
        out.append(
            {
                "request_id": req.request_id,
                "user_id": req.user_id,
                "items": [
                    {"item_id": i, "score": round(s, 6), "show": s >= threshold} for i, s in ranked
                ],
            }
        )
    return out


def serialize(responses: list[dict]) -> list[bytes]:
    """Strict JSON (a NaN or Infinity raises, never goes out as invalid JSON)."""
    return [json.dumps(r, separators=(",", ":"), allow_nan=False).encode() for r in responses]


def request_items(
    seed: int, n_users: int, n_items: int, n_keys: int = 0, zipf_s: float = 1.1
) -> Iterator[bytes]:
    """An endless, seeded stream of ranking requests (4-12 candidates; ~2 % unknown ids); with
    ``n_keys`` > 0 its first ``n_keys`` repeated, rank k with probability ~ 1 / k**zipf_s."""
    rng = random.Random(seed)
    fresh = (_request_body(rng, n_users, n_items) for _ in itertools.count())
    if n_keys <= 0:
        for n, body in enumerate(fresh):
            yield json.dumps({"request_id": f"req-{n:06d}", **body}).encode()
        return
    keys = list(itertools.islice(fresh, n_keys))
    cumulative = list(itertools.accumulate(1.0 / (k**zipf_s) for k in range(1, n_keys + 1)))
    draw = random.Random(seed + 1)
    for n in itertools.count():
        k = bisect.bisect_left(cumulative, draw.random() * cumulative[-1])
        yield json.dumps({"request_id": f"req-{n:06d}", **keys[min(k, n_keys - 1)]}).encode()


def _request_body(rng: random.Random, n_users: int, n_items: int) -> dict:
    k = rng.randint(4, 12)
    return {
        "user_id": rng.randrange(n_users + n_users // 50),
        "item_ids": [rng.randrange(n_items + n_items // 50) for _ in range(k)],
        "context": {"hour": rng.randrange(24), "device": rng.choice(DEVICES)},
    }
