"""The Locust engine's sealed messages: a forged, replayed, reflected or foreign message is refused; rows
that are not the worker's, or out of range, do not decode."""

import pytest

pytest.importorskip("msgpack", reason="msgpack comes with locust (pip install 'locust>=2.47,<3')")

from workbench_serve.locust_wire import (  # noqa: E402  (after the skip)
    BadMessage,
    Channel,
    decoded_progress,
    decoded_rows,
    hello,
    opened_hello,
)

SECRET, NODE, W_NONCE, M_NONCE = b"s" * 32, "host_1", "w" * 32, "m" * 32
KEPT = ("server-timing", "x-request-id")


def pair():
    return (
        Channel(SECRET, NODE, W_NONCE, M_NONCE, "master"),
        Channel(SECRET, NODE, W_NONCE, None, "worker"),
    )


def test_a_hello_holds_only_with_the_secret_and_for_its_node():
    assert opened_hello(SECRET, NODE, hello(SECRET, NODE, W_NONCE)) == W_NONCE
    for data in (hello(b"x" * 32, NODE, W_NONCE), hello(SECRET, "other", W_NONCE), [W_NONCE], 7):
        with pytest.raises(BadMessage):
            opened_hello(SECRET, NODE, data)


def test_sealed_messages_open_once_in_order_on_the_other_side_only():
    master, worker = pair()
    plan = master.seal("wb_plan", {"ks": [0, 2], "payloads": [b"\x00"]})
    assert worker.open("wb_plan", plan) == {"ks": [0, 2], "payloads": [b"\x00"]}
    assert worker.master_nonce == M_NONCE
    with pytest.raises(BadMessage, match="out of sequence"):
        worker.open("wb_plan", plan)  # replayed
    start = master.seal("wb_start", {"start_wall_ns": 1})
    with pytest.raises(BadMessage):
        worker.open("wb_stop", start)  # another kind
    with pytest.raises(BadMessage):
        master.open("wb_start", start)  # reflected to its sender
    forged = [M_NONCE, 2, b"\x80", start[3]]
    with pytest.raises(BadMessage):
        worker.open("wb_start", forged)
    assert worker.open("wb_start", start) == {"start_wall_ns": 1}
    other_run = Channel(SECRET, NODE, W_NONCE, "n" * 32, "master").seal("wb_start", {})
    with pytest.raises(BadMessage, match="another master"):
        worker.open("wb_start", other_run)
    ready = worker.seal("wb_ready", None)
    assert master.open("wb_ready", ready) is None
    for junk in (None, [1, 2, 3], [M_NONCE, 1, "text", b""]):
        with pytest.raises(BadMessage):
            master.open("wb_ready", junk)


def row(k, due=100, **change):
    values = dict(
        k=k,
        due=due,
        sent=110,
        done=500,
        status=200,
        headers={"x-request-id": "t-0"},
        body=b"",
        error=None,
        units=[],
    )
    return list((values | change).values())


def test_rows_decode_only_as_the_workers_own_in_range():
    share = {0: 100, 2: 300}
    cut = row(2, 300, status=None, error=["network", "E", "m"], units=[120, 120, 130])
    assert decoded_rows([row(0), cut], share, KEPT) == [
        (0, 100, 110, 500, 200, {"x-request-id": "t-0"}, b"", None, []),
        (
            2,
            300,
            110,
            500,
            None,
            {"x-request-id": "t-0"},
            b"",
            ("network", "E", "m"),
            [120, 120, 130],
        ),
    ]
    bad = [
        [row(1)],  # not this worker's request
        [row(0), row(0)],  # twice
        [row(0, due=5)],  # not its due time
        [row(0, sent=600)],  # ends before it was sent
        [row(0, status=True)],
        [row(0, status=1000)],
        [row(0, headers={"set-cookie": "x"})],
        [row(0, headers={"x-request-id": "x" * 5000})],
        [row(0, body=b"b" * 5000)],
        [row(0, status=None, error=None)],
        [row(0)[:8]],
        [row(0, units=[130, 120])],  # units out of order
        [row(0, units=[100])],  # a unit before the send
        [row(0, units=[600])],  # or after the end
        [row(0, units=[200] * 1025)],  # over MAX_UNITS
        [row(0, units=[1.5e2])],
        [row(0, units="120")],
        "rows",
    ]
    for rows in bad:
        with pytest.raises(BadMessage):
            decoded_rows(rows, share, KEPT)


def test_progress_decodes_bounded():
    assert decoded_progress([[1, 2, 3, True]], 1) == [(1, 2, 3, True)]
    for items in ([[1, 2, 3, True]] * 2, [[1, 2, 3, 1]], [[-1, 2, 3, True]], [[1, 2, 3]], {}):
        with pytest.raises(BadMessage):
            decoded_progress(items, 1)
