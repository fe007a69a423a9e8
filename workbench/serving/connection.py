"""The edge's connection-level limits: a subclass of uvicorn's own httptools protocol.

uvicorn takes a protocol class as ``http=``; this one enforces what only the
connection sees (the rules and the limits themselves are in
:mod:`workbench.serving.edge`): the request head's size, trailers included
(431), the body's (413), the time to send each (408), strict HTTP/1.x on the
head (:func:`~workbench.serving.edge.head_refusal`), the depth of pipelined
requests (503, closed), responses left unread (aborted), and the connection
slots, per client address and in all: at a limit a new connection closes a
stalled one, or a silent one, before a client between two requests
(:meth:`EdgeProtocol._victim_rank`), and gets 503 with ``Retry-After`` only
when all are busy.
"""

from __future__ import annotations

import heapq
from collections import Counter

from .edge import EdgeLimits, head_refusal, response_bytes

# A connection silent this long since it opened, or a head still arriving this long after its first
# byte, is stalled: first to give up its slot at the connection limit (idle floods, slowloris); a
# well-formed client sends its head in one packet as soon as it has connected.
STALLED_S = 1.0
DRAIN = 32  # the most connections one eviction closes (the first in line, then stalled ones)


class StopParsing(Exception):
    """Raised from a parser callback to stop parsing a connection's input (httptools stops at once)."""


def edge_protocol(limits: EdgeLimits, refused: Counter, answered: frozenset[str] | None = None):
    """uvicorn's httptools protocol with the connection-level limits of ``limits``; refusals counted in
    ``refused``; ``answered``: the server's ``Host`` names (:meth:`EdgeLimits.answered`)."""
    import httptools
    from uvicorn.protocols.http.flow_control import FlowControl
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    answered = answered if answered is not None else limits.answered()
    clients: Counter = Counter()  # open connections per client address
    closing: set = set()  # connections the edge closed that the event loop has not let go of yet

    class Flow(FlowControl):
        """Reading stays paused while a request waits behind the one in flight (pipelining), so a
        connection holds at most one read of requests ahead of its responses."""

        def __init__(self, transport, protocol) -> None:
            super().__init__(transport)
            self.protocol = protocol

        def resume_reading(self) -> None:
            if not self.protocol.pipeline and not self.protocol._draining:
                super().resume_reading()

    class EdgeProtocol(HttpToolsProtocol):
        """Phases of a connection: ``head`` (reading a request head), ``body``, ``idle`` (between requests)."""

        def connection_made(self, transport) -> None:
            self._phase, self._head_bytes, self._body_bytes = "head", 0, 0
            self._rejected, self._draining, self._deferred = False, False, None
            self._timer = self._send_timer = None
            self._served, self._marks, self._framing, self._head_size, self._own = 0, 0, 0, 0, None
            super().connection_made(transport)
            self.flow = Flow(transport, self)
            self._client = self.client[0] if self.client else ""
            clients[self._client] += 1
            self._idle_since = self._head_since = self.loop.time()
            # over its own limit, a client makes room among its own connections; else over the server's
            own = clients[self._client] > limits.max_client_connections
            if own and not self._evict_one(True):
                self._reject(
                    503,
                    "client_connections",
                    f"this client has {clients[self._client] - 1} connections open and busy; the "
                    f"limit is {limits.max_client_connections} (--max-client-connections): "
                    "retry later",
                    True,
                )
                return
            open_ = len(self.connections) - len(
                closing
            )  # closed by the edge, not yet gone: not counted
            if not own and open_ > limits.max_connections and not self._evict_one(False):
                self._reject(
                    503,
                    "connections",
                    f"{open_ - 1} connections are open and busy; the "
                    f"limit is {limits.max_connections} (--max-connections): retry later",
                    True,
                )
                return
            self._arm(limits.header_timeout_s, "header")

        def _victim_rank(self, now: float) -> tuple | None:
            """Where this connection stands in line to be closed for a new one (lowest first), or None
            when it is busy. Stalled first (silent since it opened, or a head still arriving, for
            :data:`STALLED_S`), then just opened and silent, then between two requests; within a kind,
            the client holding the most connections first (not among the just opened), then the
            longest waiting."""
            if self._rejected or self._draining:
                return None
            if not (self.cycle is None or self.cycle.response_complete):
                return None  # a request of it is being answered
            if self._phase == "idle" or (self._phase == "head" and self._head_bytes == 0):
                since = self._idle_since
                kind = 2 if self._served else (0 if now - since >= STALLED_S else 1)
            elif self._phase == "head" and now - self._head_since >= STALLED_S:
                kind, since = 0, self._head_since
            else:
                return None
            # just opened: the longest silent first (a client's fresh spare is about to be used, and
            # one holding many connections, as a load generator does, must not lose it for that)
            crowd = 0 if kind == 1 else -clients[self._client]
            return kind, crowd, since, self._head_bytes > 0

        def _evict_one(self, own: bool) -> bool:
            """Close the connection first in line (:meth:`_victim_rank`) for this new one (``own``: one of
            the same client's), as nginx reuses idle keep-alive connections, sparing a client between two
            requests while a stalled or silent one is there: a flood of idle connections or slow heads
            cannot lock well-formed clients out. Up to ``DRAIN - 1`` more stalled ones go with it (nginx
            drains 32 reusable connections at once): one scan per 32 newcomers in a flood, not one each.
            False: all are busy."""
            now, ranked = self.loop.time(), []
            for c in self.connections:
                if c is not self and not (own and getattr(c, "_client", None) != self._client):
                    rank = c._victim_rank(now) if hasattr(c, "_victim_rank") else None
                    if rank is not None:
                        ranked.append((rank, id(c), c))
            if not ranked:
                return False
            for k, (rank, _, victim) in enumerate(heapq.nsmallest(DRAIN, ranked)):
                if k and rank[0] != 0:
                    break  # only stalled ones beyond the first
                victim._rejected = True
                victim._cancel()
                victim._release()
                victim.transport.close()
                refused["evicted_slow_head" if rank[3] else "evicted_idle"] += 1
            return True

        def _release(self) -> None:
            """The connection no longer counts against the limits (closed by the edge, or gone)."""
            if self._client is not None:
                clients[self._client] -= 1
                if clients[self._client] <= 0:
                    del clients[self._client]
                self._client = None
                closing.add(self)

        def connection_lost(self, exc) -> None:
            self._cancel()
            self._unpause_timer()
            self._release()
            closing.discard(self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._draining:  # past --max-pipelined: nothing more is read from this connection
                self.transport.pause_reading()
            if self._rejected or self._draining:
                return
            # the first bytes of the next request on a kept-alive connection
            if self._phase == "idle":
                self._phase, self._head_bytes, self._head_since = "head", 0, self.loop.time()
                self._arm(limits.header_timeout_s, "header")
            if self._phase == "head":
                self._head_bytes += len(data)
            marks, body = self._marks, self._body_bytes
            self._feed(data)
            if self._rejected or self._draining:
                return
            if self._phase == "head":
                self._check_head(self._head_bytes)
            elif self._phase == "body" and marks == self._marks:
                # no chunk or request ended in this read: what was not body is one chunk's size line or the
                # trailers after the last chunk, held by the parser until their line ends
                self._framing += len(data) - (self._body_bytes - body)
                self._check_head(self._framing, "chunk framing or trailers")

        def _feed(self, data: bytes) -> None:
            """uvicorn's ``data_received``, but a parse stopped on purpose (nothing more is read from a
            connection past ``--max-pipelined``: the rest of its read is not parsed) answers nothing."""
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()
            except httptools.HttpParserError:
                if not self._draining:
                    self.logger.warning("Invalid HTTP request received.")
                    self.send_400_response("Invalid HTTP request received.")

        def on_message_begin(self) -> None:
            if self._draining:
                raise StopParsing  # the parser stops where it is; the rest of the read is dropped
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            if self._rejected or self._draining:
                return
            self._phase, self._body_bytes, self._framing, self._own = "body", 0, 0, None
            self._marks += 1
            self._cancel()
            # a head read in one go
            self._head_size = len(self.url) + sum(len(k) + len(v) + 4 for k, v in self.headers)
            if not self._check_head(self._head_size):
                return
            refuse = head_refusal(
                limits, self.parser.get_http_version(), self.url, self.headers, answered
            )
            if refuse is not None:
                self._reject(*refuse)
                return
            length = next((v for k, v in self.headers if k == b"content-length"), b"0")
            if length.strip().isdigit() and int(length) > limits.max_body_bytes:
                self._reject(
                    413,
                    "body_bytes",
                    f"a body of {int(length)} bytes is over the limit of "
                    f"{limits.max_body_bytes} (--max-body-bytes)",
                )
                return
            super().on_headers_complete()
            self._own = self.cycle
            if len(self.pipeline) > limits.max_pipelined:
                self._reject(
                    503,
                    "pipelined",
                    f"more than {limits.max_pipelined} requests were sent ahead of their responses "
                    "(--max-pipelined): only the first was answered; send the rest again on a new "
                    "connection",
                    True,
                )
            elif not self.pipeline:  # a queued request's body is read once it is its turn
                self._arm(limits.body_timeout_s, "body")

        def on_header(self, name: bytes, value: bytes) -> None:
            if self._phase != "body":
                super().on_header(name, value)
                return
            # a trailer (after the last chunk): counted with the head against its limit, not kept
            self._head_size += len(name) + len(value) + 4
            if not self._rejected and not self._draining:
                self._check_head(self._head_size, "request head and trailers")

        def on_chunk_complete(self) -> None:
            self._marks += 1
            self._framing = 0

        def _check_head(self, head_bytes: int, what: str = "request head") -> bool:
            """Refuse a request head (or its trailers) over the limit (431); False when it was refused."""
            if head_bytes <= limits.max_header_bytes:
                return True
            self._reject(
                431,
                "header_bytes",
                f"the {what} is over {limits.max_header_bytes} bytes (--max-header-bytes)",
            )
            return False

        def on_body(self, body: bytes) -> None:
            if self._rejected or self._draining:
                return
            self._body_bytes += len(body)
            if self._body_bytes > limits.max_body_bytes:
                self._reject(
                    413,
                    "body_bytes",
                    f"the body is over the limit of {limits.max_body_bytes} bytes "
                    "(--max-body-bytes)",
                )
                return
            super().on_body(body)

        def on_message_complete(self) -> None:
            if self._rejected or self._draining:
                return
            self._cancel()
            self._phase, self._marks, self._own = "idle", self._marks + 1, None
            self._idle_since = self.loop.time()
            super().on_message_complete()

        def on_response_complete(self) -> None:
            self._served += 1
            self._idle_since = self.loop.time()
            last = not self.pipeline
            super().on_response_complete()
            if (
                self._deferred is not None and last
            ):  # a refusal waiting for the responses owed before it
                self._rejected = True
                self.transport.write(self._deferred)
                self.transport.close()
            elif self._phase == "body" and self._timer is None and not self.pipeline:
                self._arm(limits.body_timeout_s, "body")  # the queued request whose turn it is

        def pause_writing(self) -> None:
            """The client is not reading its responses: it has ``send_timeout_s`` to start again."""
            super().pause_writing()
            if self._send_timer is None:
                self._send_timer = self.loop.call_later(limits.send_timeout_s, self._unread)

        def resume_writing(self) -> None:
            self._unpause_timer()
            super().resume_writing()

        def _unpause_timer(self) -> None:
            if self._send_timer is not None:
                self._send_timer.cancel()
                self._send_timer = None

        def _unread(self) -> None:
            self._send_timer = None
            refused["send_timeout"] += 1
            self._rejected = True
            self._cancel()
            self.transport.abort()  # close() would wait for the unread bytes to be taken

        def _arm(self, seconds: float, what: str) -> None:
            self._cancel()
            self._timer = self.loop.call_later(seconds, self._expired, what, seconds)

        def _cancel(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expired(self, what: str, seconds: float) -> None:
            self._timer = None
            if self._rejected or self.transport.is_closing():
                return
            if what == "header" and self._head_bytes == 0:  # opened and never used: close quietly
                refused["idle_connection"] += 1
                self._rejected = True
                self.transport.close()
                return
            self._reject(
                408,
                f"{what}_timeout",
                f"the request {'head' if what == 'header' else 'body'} was not "
                f"complete within {seconds:g} s (--{what}-timeout)",
            )

        def _reject(self, status: int, reason: str, message: str, retry: bool = False) -> None:
            """Answer ``status`` and close. When responses to earlier requests are owed (pipelining),
            they go first: nothing more is read, and the refusal is sent after the last of them."""
            self._cancel()
            refused[reason] += 1
            raw = response_bytes(status, message, limits.retry_after_s if retry else None)
            cycle, own = self.cycle, self._own
            if own is None and cycle is not None and not cycle.response_complete or self.pipeline:
                if reason == "pipelined":
                    self.pipeline.clear()  # a client that far ahead: the waiting ones are not run either
                elif own is not None and own is self.pipeline[0][0]:
                    self.pipeline.popleft()  # it was queued: it will not run
                self._draining, self._deferred = True, raw
                return
            self._rejected = True
            self._release()
            if cycle is None or cycle.response_complete or not cycle.response_started:
                self.transport.write(raw)
            self.transport.close()

    return EdgeProtocol
