"""The room's websockets: the kernel's, with its unread bytes bounded, and Voila's query socket behind the token.

Both answer a refusal (no token: 403; no such kernel: 404) with one plain-text line.
"""

from __future__ import annotations

import tornado.web
import tornado.websocket
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from voila.request_info_handler import RequestInfoSocketHandler
from voila.tornado.kernel_websocket_handler import VoilaKernelWebsocketHandler

# A page's kernel websocket may hold this many bytes the page has not read yet; past it the server closes the
# socket (code 1008) rather than buffer without end: a page flooding its kernel with requests and reading no
# reply took the server from 114 to 395 MB. A dashboard's largest message (a figure) is well under it.
WEBSOCKET_UNREAD_LIMIT_BYTES = 32 << 20


class PlainErrors:
    """A refusal as one plain-text line: jupyter_server's error page needs templates and a static path
    Voila does not have, so a websocket refused without the token logged three tracebacks."""

    def write_error(self, status_code, **kwargs):
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(f"{status_code}: {self._reason}\n")


class QuerySocketHandler(PlainErrors, WebSocketMixin, RequestInfoSocketHandler, JupyterHandler):
    """Voila's ``/voila/query/KERNEL_ID`` websocket (a page's request, query string included, for the
    preheated kernel it took) behind the token, as JupyterHandler's prepare requires; Voila's answers
    anyone, and held every socket opened. A kernel id that is not running: 404."""

    async def get(self, kernel_id, *args, **kwargs):
        if kernel_id not in self.kernel_manager:
            raise tornado.web.HTTPError(404)
        await super().get(kernel_id, *args, **kwargs)

    def write_message(self, message, binary=False):
        """Voila writes a page's query to its waiter without awaiting it: a page that left meanwhile made a
        "Task exception was never retrieved" traceback (WebSocketClosedError) in the room's log."""
        try:
            sent = super().write_message(message, binary)
        except tornado.websocket.WebSocketClosedError:
            return None
        if sent is not None and hasattr(sent, "add_done_callback"):
            sent.add_done_callback(_retrieved)
        return sent

    def on_close(self):
        # Voila's deletes the last waiter of any kernel when this socket is not among them
        waiters = RequestInfoSocketHandler._waiters
        for kernel_id in [k for k, waiter in waiters.items() if waiter is self]:
            del waiters[kernel_id]


class KernelSocketHandler(PlainErrors, VoilaKernelWebsocketHandler):
    """Voila's kernel websocket, closed (1008) when the page leaves more than
    ``workbench_ws_unread_limit_bytes`` unread: the memory a connection holds is bounded."""

    _overflowed = False

    def write_message(self, message, binary=False):
        limit = self.settings.get("workbench_ws_unread_limit_bytes", WEBSOCKET_UNREAD_LIMIT_BYTES)
        if self._overflowed:
            return None
        if _unsent_bytes(self.ws_connection) > limit:
            self._overflowed = True
            self.log.warning(
                "Closing a kernel websocket from %s: over %d bytes its page has not read",
                self.request.remote_ip,
                limit,
            )
            self.close(1008, "the page is not reading its kernel's messages")
            return None
        sent = super().write_message(message, binary)
        if sent is not None and hasattr(sent, "add_done_callback"):
            # a write the close cut short is no "never retrieved" traceback
            sent.add_done_callback(_retrieved)
        return sent


def _retrieved(future) -> None:
    if not future.cancelled():
        future.exception()


def _unsent_bytes(ws_connection) -> int:
    """Bytes written to a websocket's stream and not yet sent (tornado's IOStream counters)."""
    stream = getattr(ws_connection, "stream", None)
    if stream is None:
        return 0
    return getattr(stream, "_total_write_index", 0) - getattr(stream, "_total_write_done_index", 0)
