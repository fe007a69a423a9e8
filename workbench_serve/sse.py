"""Server-sent events: how ``serve`` streams a generative pipeline's units and ``load --url`` reads them.

Why SSE (``text/event-stream``) rather than bare chunked transfer: SSE is what the generative servers
the serving benchmarks drive speak (OpenAI-style APIs, vLLM, TGI), it frames each unit as an event,
so a unit split across reads (or several units in one read) is still one unit with one receive time,
and a browser's ``EventSource`` or ``curl -N`` reads it as it is. On HTTP/1.1 the stream goes out with
chunked transfer encoding (uvicorn's framing of a response without ``Content-Length``).

One request's stream:

* one event per unit its streaming stage yielded, ``data: <the unit as JSON>`` (a batch's unit that
  is a list of one value per request gives each request its own value, as a batch's output does; a
  str or bytes unit goes as a JSON string of its text);
* then one ``event: end`` whose data is a JSON object: ``status`` (200, or 500 when a stage raised
  after the first unit), ``server_timing`` (the ``Server-Timing`` header's value, which cannot be a
  header of a response whose head went out with the first unit), ``batch``, ``batch_size`` and
  ``body`` (the response body as text: the last stage's output, or the error's JSON).

A request whose batch ended (or failed) before its first unit gets a plain response, as a
non-streaming pipeline's.
"""

from __future__ import annotations

import json
from typing import Any

SSE_TYPE = "text/event-stream"
END = "end"  # the event that closes a request's stream
MAX_EVENT_BYTES = 4 * 2**20  # one event (the end event's body included); a longer one is BadEvent


class BadEvent(ValueError):
    """An event stream that does not decode: an event over the limit, or an end event that is not one."""


class StreamIncomplete(BadEvent):
    """An event stream that ended without its ``end`` event."""


def unit_data(unit: Any, index: int, n_items: int) -> bytes:
    """Request ``index``'s share of a batch's unit as an event's data (JSON, one line)."""
    if isinstance(unit, (list, tuple)) and len(unit) == n_items:
        unit = unit[index]
    if isinstance(unit, (bytes, bytearray, memoryview)):
        unit = bytes(unit).decode("utf-8", "replace")
    return json.dumps(unit, separators=(",", ":"), default=str).encode()


def event(data: bytes, name: str | None = None) -> bytes:
    """One event: its name (if any) and its data, a ``data:`` line per line of it, then a blank line."""
    head = b"event: %s\n" % name.encode() if name else b""
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return head + b"".join(b"data: %s\n" % line for line in lines) + b"\n"


def end_event(status: int, server_timing: str, batch: int, batch_size: int, body: bytes) -> bytes:
    """The ``end`` event (see the module docstring)."""
    obj = {
        "status": status,
        "server_timing": server_timing,
        "batch": batch,
        "batch_size": batch_size,
        "body": body.decode("utf-8", "replace"),
    }
    return event(json.dumps(obj, separators=(",", ":")).encode(), END)


def decoded_end(data: str) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` of an ``end`` event's data, the headers named as a plain response's
    (``server-timing``, ``x-workbench-batch``, ``x-workbench-batch-size``); BadEvent when it does not fit."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        raise BadEvent(f"an end event whose data is not JSON: {data[:80]!r}") from None
    ok = isinstance(obj, dict) and type(obj.get("status")) is int and 100 <= obj["status"] <= 599
    if not ok or not isinstance(obj.get("body", ""), str):
        raise BadEvent(f"an end event without a status (100-599) and a text body: {data[:80]!r}")
    headers = {
        "server-timing": obj.get("server_timing"),
        "x-workbench-batch": obj.get("batch"),
        "x-workbench-batch-size": obj.get("batch_size"),
    }
    headers = {k: str(v) for k, v in headers.items() if v is not None}
    return obj["status"], headers, obj.get("body", "").encode()


class Decoder:
    """Incremental event-stream decoder: :meth:`feed` returns the ``(name, data)`` events the bytes
    completed (name ``""`` for an unnamed event); a partial event waits for its blank line.

    Lines end with ``\\n`` or ``\\r\\n``; comment lines (``:``) and fields other than ``event`` and
    ``data`` are ignored; an event with no ``data`` line is none (the SSE rule).
    """

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self._buf = bytearray()
        self._name, self._data, self._size = "", [], 0

    def feed(self, data: bytes) -> list[tuple[str, str]]:
        self._buf += data
        out = []
        while (end := self._buf.find(b"\n")) >= 0:
            line = bytes(self._buf[:end]).removesuffix(b"\r").decode("utf-8", "replace")
            del self._buf[: end + 1]
            self._size += len(line)
            if self._size > self.max_event_bytes:
                raise BadEvent(f"an event over {self.max_event_bytes} bytes")
            if not line:
                if self._data:
                    out.append((self._name, "\n".join(self._data)))
                self._name, self._data, self._size = "", [], 0
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                self._data.append(value)
            elif field == "event":
                self._name = value
        if len(self._buf) + self._size > self.max_event_bytes:
            raise BadEvent(f"an event over {self.max_event_bytes} bytes")
        return out
