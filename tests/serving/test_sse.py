"""The event-stream framing of served generative pipelines (``workbench_serve.sse``)."""

import json

import pytest

from workbench_serve.sse import (
    BadEvent,
    Decoder,
    decoded_end,
    end_event,
    event,
    unit_data,
)

STREAM = b"data: 1\n\n: a comment\nid: 7\ndata: [2,\ndata: 3]\n\nevent: end\r\ndata: {}\r\n\r\n"


def test_a_unit_is_one_event_however_the_bytes_are_split():
    whole = Decoder().feed(STREAM)
    assert whole == [("", "1"), ("", "[2,\n3]"), ("end", "{}")]
    for cut in range(1, len(STREAM)):  # every split into two reads, inside lines and CRLFs too
        d = Decoder()
        assert d.feed(STREAM[:cut]) + d.feed(STREAM[cut:]) == whole, cut
    d = Decoder()  # one byte a read: each event completes on its blank line's byte
    got = [(k, e) for k in range(len(STREAM)) for e in d.feed(STREAM[k : k + 1])]
    assert [k for k, _ in got] == [
        STREAM.index(b"\n\n") + 1,
        STREAM.index(b"3]\n\n") + 3,
        len(STREAM) - 1,
    ]


def test_an_event_with_no_data_is_none_and_an_endless_one_is_refused():
    assert Decoder().feed(b"event: end\n\n: ping\n\n") == []
    with pytest.raises(BadEvent, match="over 64 bytes"):
        Decoder(64).feed(b"data: " + b"x" * 100)  # no line end yet: bounded all the same
    with pytest.raises(BadEvent, match="over 64 bytes"):
        Decoder(64).feed(b"data: x\n" * 20)


def test_units_split_per_request_and_framed_as_json_lines():
    assert unit_data([5, 6], 1, 2) == b"6"
    assert unit_data([5, 6], 0, 1) == b"[5,6]"  # a batch of one: the whole unit
    assert unit_data(b"caf\xc3\xa9", 0, 1) == b'"caf\\u00e9"'
    assert event(b"a\nb") == b"data: a\ndata: b\n\n"
    assert Decoder().feed(event(b"a\r\nb", "x")) == [("x", "a\nb")]


def test_the_end_event_reads_as_a_plain_response():
    raw = end_event(500, "total;dur=1.5", 3, 2, b'{"error": "boom"}')
    assert raw.startswith(b'event: end\ndata: {"status":500,')  # server.END_FAILED
    [(name, data)] = Decoder().feed(raw)
    status, headers, body = decoded_end(data)
    assert (name, status, body) == ("end", 500, b'{"error": "boom"}')
    assert headers == {
        "server-timing": "total;dur=1.5",
        "x-workbench-batch": "3",
        "x-workbench-batch-size": "2",
    }
    assert decoded_end(json.dumps({"status": 200})) == (200, {}, b"")
    for bad in (
        "nope",
        "[1]",
        '{"status": "200"}',
        '{"status": 2000}',
        '{"status": 200, "body": 5}',
    ):
        with pytest.raises(BadEvent):
            decoded_end(bad)
