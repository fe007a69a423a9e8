"""Reading a trace file into one UTF-8 JSON buffer, with a cap on its size.

Gzip is decompressed as a stream, each piece checked against ``max_bytes``: a "gzip bomb" stops
at the cap instead of growing until the machine swaps. UTF-16/32 (RFC 4627) is converted to UTF-8.
"""

from __future__ import annotations

import codecs
import os
import zlib
from pathlib import Path

from ..errors import TraceError
from ..files import open_regular

DEFAULT_MAX_TRACE_BYTES = 4 * 2**30  # 4 GiB of JSON: a 1 GB trace still loads
GZIP_MAGIC = b"\x1f\x8b"
_IN_CHUNK = 1 << 20  # compressed bytes read at a time
_OUT_CHUNK = 8 << 20  # decompressed bytes produced at a time (the cap's granularity)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_ZEROS = {  # which of the first 4 bytes are zero -> the encoding without a BOM
    (True, True, True, False): "utf-32-be",
    (False, True, True, True): "utf-32-le",
    (True, False, True, False): "utf-16-be",
    (False, True, False, True): "utf-16-le",
}


def read_bytes(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_TRACE_BYTES):
    """The UTF-8 JSON text of a ``.json`` or gzip file, refused before it is over ``max_bytes``."""
    path = Path(path)
    hint = "save the trace to a file and give that"
    try:
        with open_regular(path, TraceError, "trace file", hint) as stream:
            if stream.peek(2)[:2] == GZIP_MAGIC:  # peek: pipes cannot seek back
                data = _gunzip(path, stream, max_bytes)
            else:
                size = os.fstat(stream.fileno()).st_size
                if size > max_bytes:
                    raise TraceError(_too_big(path, max_bytes, size))
                data = stream.read(max_bytes + 1)  # a file growing while it is read
                if len(data) > max_bytes:
                    raise TraceError(_too_big(path, max_bytes))
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the trace file ({exc.strerror or exc})") from None
    return as_utf8(path, data)


def _too_big(path: Path, max_bytes: int, size: int | None = None) -> str:
    what = "it holds more JSON than that (reading stopped at the cap)"
    if size is not None:
        what = f"{size:,} bytes of JSON"
    return (
        f"{path}: trace too large for the cap of {max_bytes:,} bytes: {what}; "
        "if the trace is genuine, raise the cap (analyze --max-trace-bytes, load_trace(max_bytes=...))"
    )


def _gunzip(path: Path, stream, max_bytes: int) -> bytearray:
    """Decompress every gzip member of ``stream``, stopping as soon as the output passes ``max_bytes``."""
    out = bytearray()
    feed = _Feed(stream)
    while True:
        # one gzip member: header, deflate data, CRC and size check
        unzip = zlib.decompressobj(wbits=31)
        while not unzip.eof:
            data, room = feed.take(), min(_OUT_CHUNK, max_bytes - len(out) + 1)
            try:
                piece = unzip.decompress(data, room) if data else unzip.flush()
            except zlib.error as exc:
                raise TraceError(
                    f"{path}: corrupt gzip data ({exc}) in the compressed bytes after byte "
                    f"{feed.offset:,}; re-copy or re-export the trace"
                ) from None
            out += piece
            if len(out) > max_bytes:
                raise TraceError(_too_big(path, max_bytes))
            if not data and not unzip.eof:
                raise TraceError(
                    f"{path}: truncated gzip data: the file ends after {feed.read:,} bytes, "
                    "before the end of the compressed stream; re-copy or re-export the trace"
                )
            feed.give_back(unzip.unused_data if unzip.eof else unzip.unconsumed_tail)
        if feed.rest_is_zeros():
            return out  # the end (zero padding after the last member is allowed, as gzip does)
        if not feed.starts_with(GZIP_MAGIC):
            raise TraceError(
                f"{path}: corrupt gzip data: unexpected bytes after the compressed stream "
                f"(at byte {feed.offset:,}); re-copy or re-export the trace"
            )


class _Feed:
    """Compressed input in pieces, the unconsumed part handed back; counts bytes for error messages."""

    def __init__(self, stream):
        self.stream, self.pending, self.read = stream, b"", 0

    @property
    def offset(self) -> int:
        """Bytes of the file before the first byte not yet consumed."""
        return self.read - len(self.pending)

    def _more(self) -> bytes:
        data = self.stream.read(_IN_CHUNK)
        self.read += len(data)
        return data

    def take(self) -> bytes:
        """The next input; call :meth:`give_back` with what was not consumed."""
        data = self.pending or self._more()
        self.pending = data  # until given back, offset points at its start
        return data

    def give_back(self, rest: bytes) -> None:
        self.pending = bytes(rest)

    def starts_with(self, prefix: bytes) -> bool:
        while len(self.pending) < len(prefix) and (more := self._more()):
            self.pending += more
        return self.pending.startswith(prefix)

    def rest_is_zeros(self) -> bool:
        if self.pending.strip(b"\x00"):
            return False
        while more := self._more():
            if more.strip(b"\x00"):
                self.pending = more
                return False
        return True


def as_utf8(path: Path, data):
    """``data`` as UTF-8 JSON text: a UTF-8 BOM skipped, UTF-16/32 converted."""
    head = bytes(data[:4])
    encoding = next((name for bom, name in _BOMS if head.startswith(bom)), None)
    if encoding is None and len(head) == 4 and 0 in head:  # no BOM: zero bytes tell (RFC 4627)
        encoding = _ZEROS.get(tuple(b == 0 for b in head))
    if encoding is None:
        return data
    if encoding == "utf-8-sig":
        return memoryview(data)[3:]
    try:
        return bytes(data).decode(encoding).encode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(
            f"{path}: invalid {encoding.upper()} text at byte {exc.start:,} "
            f"({exc.reason}); re-export the trace as UTF-8"
        ) from None
    except UnicodeEncodeError as exc:  # lone surrogates
        raise TraceError(
            f"{path}: invalid {encoding.upper()} text ({exc.reason}); re-export the trace as UTF-8"
        ) from None


def utf8_error_offset(data) -> tuple[int, str] | None:
    """Byte offset and reason of the first invalid UTF-8 in ``data`` (None: valid), in 16 MiB pieces."""
    view, start = memoryview(data), 0
    while start < len(view):
        piece = view[start : start + (16 << 20)]
        final = start + len(piece) >= len(view)
        try:
            _, used = codecs.utf_8_decode(piece, "strict", final)
        except UnicodeDecodeError as exc:
            return start + exc.start, exc.reason
        if used == 0:
            return start, "incomplete character"
        start += used
    return None
