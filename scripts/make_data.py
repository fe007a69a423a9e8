"""Regenerate the example data in ``data/``: the feature store and the vocabulary.

    python scripts/make_data.py [--out DIR] [--redis-url redis://HOST:PORT/DB]

Writes, deterministically (fixed seeds, fixed insert order, no downloads):

- ``features.sqlite``: the online feature store of the ``tabular`` example.
  Tables: ``users`` (5,000 rows), ``items`` (2,000), ``item_stats`` (2,000),
  ``user_category`` (sparse user x category affinities, ~20,000 rows),
  ``feature_stats`` (offline mean/std per raw feature, for normalization) and
  ``meta`` (schema version, seed).
- ``vocab.txt``: the wordpiece vocabulary of the ``text`` example, one token
  per line, the line number is the token id; special tokens first.

With ``--redis-url``, the same features are then copied row for row into that
Redis (keys ``wb:tabular:*``, replaced), for the tabular example's
``--option store=redis``: both stores hold the same features, from this one script.

Idempotent: each file is built in a temporary file and replaces the old one
only when the bytes differ, so a second run changes nothing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

import numpy as np

SEED = 20240611
N_USERS = 5_000
N_ITEMS = 2_000
N_CATEGORIES = 24
CATEGORIES_PER_USER = 4
SCHEMA_VERSION = "1"

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
PUNCTUATION = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
SUFFIXES = """s es ed ing er ers est ly ment ments ness tion tions sion able ible al ful less ous ive ity
ize ized izes ise ised y ies ied ier iest en ence ance ant ent ship hood ward wards age ages ist ists ism
ery ory ary ic ical ically""".split()
# Common English words, plus the words of the example's customer-support domain.
WORDS = """the be to of and a in that have i it for not on with he as you do at this but his by from they we
say her she or an will my one all would there their what so up out if about who get which go me when make can
like time no just him know take people into year your good some could them see other than then now look only
come its over think also back after use two how our work first well way even new want because any these give
day most us is are was were been has had did does done said says got made went gone came find found tell told
ask asked seem feel try leave call called keep let begin show hear play run move live believe hold bring happen
write provide sit stand lose pay meet include continue set learn change lead understand watch follow stop create
speak read allow add spend grow open walk win offer remember love consider appear buy wait serve die send expect
build stay fall cut reach kill remain suggest raise pass sell require report decide pull order orders ordered
account accounts payment payments refund refunds charge charged charges card cards bill billing invoice invoices
price prices cost costs fee fees discount coupon code codes promo subscription subscriptions plan plans upgrade
downgrade cancel cancelled cancellation renew renewal trial free premium delivery deliver delivered shipping ship
shipped shipment package parcel tracking track number address street city zip postal country arrive arrived
late delay delayed damaged broken missing wrong item items product products size color return returned returns
exchange replace replacement warranty repair login password reset email phone app website page error bug crash
crashes crashed slow fast update updated install download upload screen button click link message messages
notification notifications settings profile privacy data delete deleted security locked unlock verify verified
help support agent service customer customers question questions issue issues problem problems request requests
thanks thank please hello hi hey sorry sure yes okay ok still never again already yet soon today yesterday
tomorrow week weeks month months hour hours minute minutes morning evening night last next since until before
during while why where how much many more less very really too also again here there everything nothing
something anything someone anyone nobody great bad terrible awful happy unhappy angry frustrated disappointed
satisfied excellent amazing poor quality cheap expensive small large big little long short old young high low
right left same different able unable possible impossible important easy hard clear sure available unavailable
money dollar dollars euro euros credit debit bank transfer paypal wallet balance total amount tax receipt
store shop shopping cart checkout basket stock inventory sale sales deal deals offer offers gift voucher
manager team company business office home family friend friends children child kids food water room house
car road train flight ticket tickets hotel booking booked reservation reserve seat seats travel trip""".split()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Regenerate the example data (feature store, vocabulary)."
    )
    repo = Path(__file__).resolve().parents[1]
    defaults = [
        repo / "data",
        repo / "workbench" / "examples" / "data",
    ]  # notebooks' copy, the package's copy
    parser.add_argument(
        "--out", type=Path, help=f"output folder (default: both {defaults[0]} and {defaults[1]})"
    )
    parser.add_argument(
        "--redis-url", help="also load the tabular features into this Redis (redis://HOST:PORT/DB)"
    )
    args = parser.parse_args(argv)
    for out in [args.out] if args.out is not None else defaults:
        out.mkdir(parents=True, exist_ok=True)
        for name, writer in (("features.sqlite", write_feature_store), ("vocab.txt", write_vocab)):
            changed = build_file(out / name, writer)
            print(f"{out / name}: {'written' if changed else 'unchanged'}")
    if args.redis_url:
        return load_redis_features((args.out or defaults[0]) / "features.sqlite", args.redis_url)
    return 0


def load_redis_features(sqlite_path: Path, url: str) -> int:
    """Copy the SQLite feature store into Redis; one line on success, one line and 2 when Redis is absent."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from workbench.errors import WorkbenchError
    from workbench_redis.feature_store import load_redis

    try:
        counts = load_redis(sqlite_path, url)
    except WorkbenchError as exc:
        print(f"make_data: error: {exc}", file=sys.stderr)
        return 2
    print(f"{url}: {', '.join(f'{n} {k}' for k, n in counts.items())} keys from {sqlite_path}")
    return 0


def build_file(path: Path, writer) -> bool:
    """Write ``path`` through ``writer(tmp_path)``; replace only when the bytes differ."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        tmp_path.unlink()
        writer(tmp_path)
        if path.exists() and path.read_bytes() == tmp_path.read_bytes():
            return False
        os.replace(tmp_path, path)
        return True
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_feature_store(path: Path) -> None:
    """The tabular example's feature store (see the module docstring for tables)."""
    rng = np.random.default_rng(SEED)
    users = _users(rng)
    items = _items(rng)
    stats = _item_stats(rng, items)
    affinity = _user_category(rng)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO users VALUES (?,?,?,?,?,?,?)", users)
        conn.executemany("INSERT INTO items VALUES (?,?,?,?,?)", items)
        conn.executemany("INSERT INTO item_stats VALUES (?,?,?,?)", stats)
        conn.executemany("INSERT INTO user_category VALUES (?,?,?,?)", affinity)
        conn.executemany(
            "INSERT INTO feature_stats VALUES (?,?,?)",
            _feature_stats(users, items, stats, affinity),
        )
        conn.executemany(
            "INSERT INTO meta VALUES (?,?)",
            [("schema_version", SCHEMA_VERSION), ("seed", str(SEED))],
        )
        conn.commit()
        conn.execute("VACUUM")
    finally:
        conn.close()


SCHEMA = """
CREATE TABLE users (user_id INTEGER PRIMARY KEY, age_bucket INTEGER, tenure_days INTEGER, country TEXT,
                    sessions_7d INTEGER, purchases_30d INTEGER, avg_basket REAL);
CREATE TABLE items (item_id INTEGER PRIMARY KEY, category_id INTEGER, price REAL, rating REAL, age_days INTEGER);
CREATE TABLE item_stats (item_id INTEGER PRIMARY KEY, impressions_7d INTEGER, clicks_7d INTEGER,
                         add_to_cart_7d INTEGER);
CREATE TABLE user_category (user_id INTEGER, category_id INTEGER, affinity REAL, last_seen_days INTEGER,
                            PRIMARY KEY (user_id, category_id)) WITHOUT ROWID;
CREATE TABLE feature_stats (name TEXT PRIMARY KEY, mean REAL, std REAL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
"""
COUNTRIES = ["US", "DE", "FR", "GB", "IN", "BR", "JP", "ES", "IT", "NL"]


def _users(rng) -> list[tuple]:
    n = N_USERS
    age = rng.integers(0, 7, n)
    tenure = rng.integers(0, 3650, n)
    country = rng.integers(0, len(COUNTRIES), n)
    sessions = rng.poisson(6.0, n)
    purchases = rng.poisson(1.5, n)
    basket = np.round(rng.lognormal(3.5, 0.6, n), 2)
    return [
        (
            i,
            int(age[i]),
            int(tenure[i]),
            COUNTRIES[country[i]],
            int(sessions[i]),
            int(purchases[i]),
            float(basket[i]),
        )
        for i in range(n)
    ]


def _items(rng) -> list[tuple]:
    n = N_ITEMS
    category = rng.integers(0, N_CATEGORIES, n)
    price = np.round(rng.lognormal(3.0, 0.9, n), 2)
    rating = np.round(np.clip(rng.normal(4.0, 0.6, n), 1.0, 5.0), 2)
    age = rng.integers(0, 1000, n)
    return [(i, int(category[i]), float(price[i]), float(rating[i]), int(age[i])) for i in range(n)]


def _item_stats(rng, items: list[tuple]) -> list[tuple]:
    impressions = rng.poisson(800.0, len(items))
    ctr = rng.beta(2.0, 60.0, len(items))
    clicks = rng.binomial(impressions, ctr)
    carts = rng.binomial(clicks, 0.2)
    return [
        (row[0], int(impressions[i]), int(clicks[i]), int(carts[i])) for i, row in enumerate(items)
    ]


def _user_category(rng) -> list[tuple]:
    rows = []
    for user in range(N_USERS):
        cats = np.sort(rng.choice(N_CATEGORIES, CATEGORIES_PER_USER, replace=False))
        for cat in cats:
            rows.append(
                (user, int(cat), round(float(rng.beta(2.0, 5.0)), 4), int(rng.integers(0, 90)))
            )
    return rows


def _feature_stats(users, items, stats, affinity) -> list[tuple]:
    """Mean and population std of each raw numeric feature, named ``table.column``."""
    columns = {
        "users": (
            users,
            {
                "age_bucket": 1,
                "tenure_days": 2,
                "sessions_7d": 4,
                "purchases_30d": 5,
                "avg_basket": 6,
            },
        ),
        "items": (items, {"price": 2, "rating": 3, "age_days": 4}),
        "item_stats": (stats, {"impressions_7d": 1, "clicks_7d": 2, "add_to_cart_7d": 3}),
        "user_category": (affinity, {"affinity": 2, "last_seen_days": 3}),
    }
    out = []
    for table, (rows, cols) in columns.items():
        for col, idx in cols.items():
            values = np.array([r[idx] for r in rows], dtype=np.float64)
            out.append(
                (
                    f"{table}.{col}",
                    round(float(values.mean()), 6),
                    round(float(values.std()) or 1.0, 6),
                )
            )
    return out


def vocab_tokens() -> list[str]:
    """Special tokens, characters, words, then ``##`` continuation pieces, without duplicates."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    digits = [str(d) for d in range(10)]
    singles = letters + digits + PUNCTUATION
    words = sorted(set(WORDS))
    prefixes = sorted({w[:n] for w in words for n in (2, 3, 4) if len(w) > n})
    pieces = ["##" + s for s in singles[:36]]
    pieces += ["##" + a + b for a, b in itertools.product(letters, repeat=2)]
    pieces += ["##" + s for s in SUFFIXES]
    pieces += sorted({"##" + w[i : i + 3] for w in words for i in range(1, len(w) - 2)})
    pieces += ["##" + d1 + d2 for d1, d2 in itertools.product(digits, repeat=2)]
    tokens = SPECIAL_TOKENS + singles + words + prefixes + pieces
    return list(dict.fromkeys(tokens))


def write_vocab(path: Path) -> None:
    path.write_text("\n".join(vocab_tokens()) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
