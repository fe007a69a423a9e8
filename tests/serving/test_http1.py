"""The load generator's HTTP/1.1 response parser: framing, keep-alive, interim responses, bad bytes."""

import pytest

from workbench_serve.http1 import BadResponse, ResponseParser, request_bytes

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer-Timing: total;dur=1.5\r\n\r\nhello"


def test_content_length_fed_one_byte_at_a_time_gives_one_response_at_the_last_byte():
    p = ResponseParser()
    got = [p.feed(OK[k : k + 1]) for k in range(len(OK))]
    assert got[:-1] == [[]] * (len(OK) - 1)
    assert got[-1] == [
        (200, {"content-length": "5", "server-timing": "total;dur=1.5"}, b"hello", True)
    ]
    assert not p.busy


def test_two_responses_in_one_read_and_the_start_of_a_third():
    p = ResponseParser()
    out = p.feed(OK + OK.replace(b"200 OK", b"500 Internal Server Error") + OK[:20])
    assert [(status, body) for status, _, body, _ in out] == [(200, b"hello"), (500, b"hello")]
    assert p.busy
    assert p.feed(OK[20:])[0][2] == b"hello"


def test_chunked_body_with_an_extension_and_trailers():
    p = ResponseParser()
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    assert p.feed(raw[:60]) == []
    assert p.feed(raw[60:]) == [(200, {"transfer-encoding": "chunked"}, b"Wikipedia", True)]
    assert p.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")[0][2] == b""


def test_body_to_the_end_of_the_connection_is_not_kept_alive():
    p = ResponseParser()
    assert p.feed(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nab") == []
    assert p.feed(b"c") == []
    assert p.feed_eof() == (200, {"content-type": "text/plain"}, b"abc", False)
    assert p.feed_eof() is None


def test_keep_alive_rules_of_http_1_0_and_1_1():
    def keep(head):
        return ResponseParser().feed(head + b"\r\nContent-Length: 0\r\n\r\n")[0][3]

    assert keep(b"HTTP/1.1 200 OK") is True
    assert keep(b"HTTP/1.1 200 OK\r\nConnection: close") is False
    assert keep(b"HTTP/1.0 200 OK") is False
    assert keep(b"HTTP/1.0 200 OK\r\nConnection: keep-alive") is True


def test_interim_100_continue_is_skipped_and_204_has_no_body():
    p = ResponseParser()
    out = p.feed(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nServer-Timing: a;dur=1\r\n"
        b"Server-Timing: total;dur=2\r\n\r\n"
    )
    assert out == [(204, {"server-timing": "a;dur=1, total;dur=2"}, b"", True)]  # repeats joined


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "not an HTTP/1.x status line: 'SSH-2.0-OpenSSH_9.2'"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "Content-Length 'ten' is not a number"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "a header line without ':': 'no colon here'"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "chunk size b'zz' is not hexadecimal",
        ),
    ],
)
def test_bad_bytes_raise_naming_the_problem(raw, message):
    with pytest.raises(BadResponse) as info:
        ResponseParser().feed(raw)
    assert str(info.value) == message


def test_a_head_without_end_is_refused_past_64_kib():
    p = ResponseParser()
    assert p.feed(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 10_000) == []
    with pytest.raises(BadResponse, match="no end of the response head within 65536 bytes"):
        p.feed(b"X: y\r\n" * 2_000)


def test_request_bytes_frame_the_body():
    assert request_bytes("POST", "/p", "h:1", {"X-Request-Id": "a"}, b"xy") == (
        b"POST /p HTTP/1.1\r\nHost: h:1\r\nX-Request-Id: a\r\nContent-Length: 2\r\n\r\nxy"
    )
    assert (
        request_bytes("GET", "/healthz", "h:1", {}) == b"GET /healthz HTTP/1.1\r\nHost: h:1\r\n\r\n"
    )
