import sqlite3
from pathlib import Path

import pytest

from tests.conftest import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_data.py"
REPO_DATA = SCRIPT.parents[1] / "data"


@pytest.fixture(scope="module")
def make_data():
    return load_script(SCRIPT, "make_data_script")


def test_second_run_changes_nothing(make_data, tmp_path, capsys):
    assert make_data.main(["--out", str(tmp_path)]) == 0
    first = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert make_data.main(["--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("unchanged") == 2
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == first
    assert sorted(first) == ["features.sqlite", "vocab.txt"]
    assert len(first["features.sqlite"]) < 2_000_000


def dump(path: Path) -> list[str]:
    """The SQL text of a database: equal content, whatever SQLite version wrote the file header."""
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_shipped_data_matches_the_script(make_data, tmp_path):
    if not (REPO_DATA / "features.sqlite").is_file():
        pytest.skip("data/ not generated yet (make data)")
    make_data.main(["--out", str(tmp_path)])
    assert (tmp_path / "vocab.txt").read_bytes() == (REPO_DATA / "vocab.txt").read_bytes(), (
        "data/ is stale: make data"
    )
    assert dump(tmp_path / "features.sqlite") == dump(REPO_DATA / "features.sqlite"), (
        "data/ is stale: make data"
    )


def test_feature_store_tables(make_data, tmp_path):
    make_data.main(["--out", str(tmp_path)])
    conn = sqlite3.connect(tmp_path / "features.sqlite")
    count = {
        t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("users", "items", "item_stats", "user_category", "feature_stats")
    }
    assert count == {
        "users": 5000,
        "items": 2000,
        "item_stats": 2000,
        "user_category": 20000,
        "feature_stats": 13,
    }
    conn.close()


def test_vocab_starts_with_special_tokens_and_has_no_duplicates(make_data):
    tokens = make_data.vocab_tokens()
    assert tokens[:4] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    assert len(tokens) == len(set(tokens)) and 2000 <= len(tokens) <= 5000
    assert {"refund", "##ing", "##th", "a", "7"} <= set(tokens)
