"""The edge's connection-level limits: a subclass of uvicorn's own httptools protocol.

uvicorn takes a protocol class as ``http=``; this one enforces what only the
connection sees (the rules and the limits themselves are in
:mod:`workbench_serve.edge`): the request head's size, trailers included
(431), the body's (413), the time to send each (408), strict HTTP/1.x on the
head (:func:`~workbench_serve.edge.head_refusal`), the depth of pipelined
requests (503, closed), responses left unread (aborted), and the connection
slots, per client address and in all: at a limit a new connection closes a
stalled one, or a silent one, before a client between two requests
(:meth:`EdgeProtocol._victim_rank`), and gets 503 with ``Retry-After`` only
when all are busy. A client refused ``--client-strikes`` times within
``--client-penalty`` seconds (oversized heads or bodies, pipelining past the
limit, unread replies, slow heads, foreign hosts) has its new connections held
unread for that long (:class:`Strikes`): reconnecting in a loop then costs the
server an accept, not a parse and a prediction, and the attacker's own
threads wait on their unread sockets.
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
SPARE_S = 0.05  # how long the rest of one scan's line serves the next newcomers (a burst: one scan)
TRACKED = 65_536  # client addresses whose strikes are remembered (the oldest forgotten first)
NOT_STRIKES = frozenset(
    {"connections", "client_connections"}
)  # the server is full: not the client's fault


class Strikes:
    """Refusals per client address within a window; past the limit, the address is penalized until a
    time (event-loop seconds). Memory is bounded: at most :data:`TRACKED` addresses are remembered."""

    def __init__(self, limit: int, window_s: float):
        self.limit, self.window_s = limit, window_s
        self.counts: dict[str, tuple[int, float]] = {}  # address -> (refusals, first of the window)
        self.until: dict[str, float] = {}  # address -> end of its penalty

    def add(self, client: str, now: float) -> bool:
        """Count one refusal of ``client`` at ``now``; True when it starts a penalty."""
        count, since = self.counts.pop(client, (0, now))
        if now - since > self.window_s:
            count, since = 0, now
        if count + 1 >= self.limit:
            self.until[client] = now + self.window_s
            self._bound(self.until)
            return True
        self.counts[client] = (count + 1, since)  # re-inserted: the dict's order is last use
        self._bound(self.counts)
        return False

    def held_until(self, client: str, now: float) -> float | None:
        """When ``client``'s penalty ends, or None when it has none."""
        end = self.until.get(client)
        if end is not None and end <= now:
            del self.until[client]
            return None
        return end

    @staticmethod
    def _bound(table: dict) -> None:
        while len(table) > TRACKED:
            del table[next(iter(table))]


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
    strikes = Strikes(limits.client_strikes, limits.client_penalty_s)
    line: list = []  # the rest of the last scan's line to be closed, last first (see SPARE_S)
    line_at = [0.0]

    class Flow(FlowControl):
        """Reading stays paused while a request waits behind the one in flight (pipelining), so a
        connection holds at most one read of requests ahead of its responses."""

        def __init__(self, transport, protocol) -> None:
            super().__init__(transport)
            self.protocol = protocol

        def resume_reading(self) -> None:
            p = self.protocol  # None once the connection is gone
            if p is None or not p.pipeline and not p._draining:
                super().resume_reading()

    class EdgeProtocol(HttpToolsProtocol):
        """Phases of a connection: ``head`` (reading a request head), ``body``, ``idle`` (between requests)."""

        def connection_made(self, transport) -> None:
            self._phase, self._head_bytes, self._body_bytes = "head", 0, 0
            self._rejected, self._draining, self._deferred, self._held = False, False, None, False
            self._timer = self._send_timer = None
            self._served, self._marks, self._framing, self._head_size, self._own = 0, 0, 0, 0, None
            self._cycles: list = []  # the requests whose responses are not complete (see connection_lost)
            super().connection_made(transport)
            self.flow = Flow(transport, self)
            self._client = self._addr = self.client[0] if self.client else ""
            clients[self._client] += 1
            self._idle_since = self._head_since = self.loop.time()
            held_until = strikes.held_until(self._addr, self._idle_since)
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
            if held_until is not None:
                self._hold(held_until - self._idle_since)
                return
            self._arm(limits.header_timeout_s, "header")

        def _hold(self, seconds: float) -> None:
            """A penalized client's connection: nothing is read from it; it is closed when the penalty
            ends, or first of all at a connection limit."""
            self._held = True
            refused["client_penalty"] += 1
            self.transport.pause_reading()
            self._timer = self.loop.call_later(seconds, self._close_held)

        def _close_held(self) -> None:
            self._timer = None
            self._rejected = True
            self._release()
            self.transport.abort()

        def _strike(self) -> None:
            """Count a refusal against this connection's client; when that starts its penalty, its
            other connections not being answered (silent, between requests, a head arriving) are
            held too: a slowloris client's trickle is no longer read."""
            now = self.loop.time()
            if not strikes.add(self._addr, now):
                return
            refused["client_penalized"] += 1
            for c in list(self.connections):
                if c is not self and getattr(c, "_addr", None) == self._addr and not c._held:
                    if c._victim_rank(now) is not None:
                        c._cancel()
                        c._hold(limits.client_penalty_s)

        def _victim_rank(self, now: float) -> tuple | None:
            """Where this connection stands in line to be closed for a new one (lowest first), or None
            when it is busy. Stalled first (silent since it opened, or a head still arriving, for
            :data:`STALLED_S`), then just opened and silent, then between two requests; within a kind,
            the client holding the most connections first (not among the just opened), then the
            longest waiting."""
            if self._held:
                return -1, 0, self._idle_since, False
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
            The rest of that line serves the next newcomers for :data:`SPARE_S` (a burst of
            connections costs one scan, not one each). False: all are busy."""
            now, ranked = self.loop.time(), []
            while not own and line and now - line_at[0] < SPARE_S:
                rank, victim = line.pop()
                if victim.transport is not None and not victim.transport.is_closing():
                    if victim._victim_rank(now) is not None:
                        self._close_victim(victim, rank)
                        return True
            line.clear()
            for c in self.connections:
                if c is not self and not (own and getattr(c, "_client", None) != self._client):
                    rank = c._victim_rank(now) if hasattr(c, "_victim_rank") else None
                    if rank is not None:
                        ranked.append((rank, id(c), c))
            if not ranked:
                return False
            first = heapq.nsmallest(DRAIN, ranked)
            for k, (rank, _, victim) in enumerate(first):
                if k and rank[0] > 0:  # only stalled (or held) ones beyond the first
                    if not own:
                        line.extend((r, v) for r, _, v in reversed(first[k:]))
                        line_at[0] = now
                    break
                self._close_victim(victim, rank)
            return True

        def _close_victim(self, victim, rank: tuple) -> None:
            victim._rejected = True
            victim._cancel()
            victim._release()
            victim.transport.close()
            if rank[0] < 0:
                refused["evicted_held"] += 1
            elif rank[3]:
                refused["evicted_slow_head"] += 1
                victim._strike()
            else:
                refused["evicted_idle"] += 1

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
            # uvicorn tells only the newest request (self.cycle) that the client is gone: a response
            # streaming ahead of pipelined requests (an event stream the send timeout aborted) went on
            # writing each unit to the closed socket ("socket.send() raised exception.")
            for cycle in self._cycles:
                if not cycle.response_complete:
                    cycle.disconnected = True
                    cycle.message_event.set()
            self._cycles = []
            super().connection_lost(exc)
            # the protocol <-> Flow cycle would keep every closed connection until a full collection:
            # under a flood, thousands piled up and that collection paused the server 150-250 ms
            self.flow.protocol = None

        def data_received(self, data: bytes) -> None:
            if self._held:
                return
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
            self._cycles = [c for c in self._cycles if not c.response_complete] + [self.cycle]
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
            self._strike()
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
            if reason not in NOT_STRIKES:
                self._strike()
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
