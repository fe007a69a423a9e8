"""The launcher: Voila with a Host allow-list, a token off loopback, culling and scratch cleanup.

Voila 0.5.13 standalone hard-codes ``allow_remote_access=True``, so jupyter's
own Host check never runs; :class:`HostGuardApplication` checks every request
(pages, static files, websockets) before routing, and answers 403 to a Host it
does not know. The page's shutdown request on close carries the ``_xsrf``
cookie only if one was set, and Voila's render handler never sets it (the
``403 '_xsrf' argument missing`` on every close): :class:`RenderHandler` sets
it, so the kernel is shut down at once. Culling catches what the page cannot
report (a crashed browser, a dropped network).
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

import tornado.web
from traitlets.config import Config
from voila.app import Voila
from voila.tornado.handler import TornadoVoilaHandler

from .hosts import allowed_hosts, host_allowed, is_loopback_bind

REPO = Path(__file__).resolve().parents[2]
TEMPLATE_PATH = REPO / "share" / "jupyter"
FILE_ALLOWLIST = [r".*\.(png|jpg|gif|svg|json|gz)"]
WEBSOCKET_OVERHEAD_BYTES = 1 << 20  # room for the message header around an upload's bytes
UPLOAD_LIMIT_ENV = "WORKBENCH_UPLOAD_LIMIT_BYTES"
# After a cell's execute_reply, the server waits this long for the cell's outputs (nbclient's
# iopub_timeout, 4 s by default). A room's server reads many kernels' widget messages at once, and
# on a busy machine a dashboard's last outputs came later than 4 s: nbclient then dropped them and
# Voila served the page without its widgets, with no word (tests/browser/test_room.py's 8 pages).
IOPUB_TIMEOUT_S = 120


class ForbiddenHostHandler(tornado.web.RequestHandler):
    """403 for a request whose Host header is not on the allow-list (plain text, one line)."""

    def prepare(self):
        self.set_status(403)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(f"403: Host {self.request.host!r} is not served here (DNS rebinding guard; "
                    "the server's --allow-host adds a name)\n")


class HostGuardApplication(tornado.web.Application):
    """A tornado Application that routes only requests whose Host is in ``settings['workbench_allowed_hosts']``."""

    def find_handler(self, request, **kwargs):
        allowed = self.settings.get("workbench_allowed_hosts", frozenset())
        if not host_allowed(request.headers.get("Host"), allowed):
            return self.get_handler_delegate(request, ForbiddenHostHandler)
        return super().find_handler(request, **kwargs)


class RenderHandler(TornadoVoilaHandler):
    """Voila's page handler, setting the ``_xsrf`` cookie the page's shutdown beacon sends back."""

    async def prepare(self):
        await super().prepare()
        if not self._finished:
            self.xsrf_token  # noqa: B018 - reading it sets the cookie (tornado)


class ConfigJsHandler(tornado.web.RequestHandler):
    """``workbench/room/config.js``: the page's upload limit, read by our template's script."""

    def get(self):
        limit = int(self.settings["workbench_upload_limit_bytes"])
        self.set_header("Content-Type", "application/javascript; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(f"window.workbenchUploadLimitBytes = {limit};\n")


class RoomVoila(Voila):
    """Voila, with our Application class, render handler and config script."""

    name = "workbench-room"

    def start(self):
        # Voila.start with HostGuardApplication in place of tornado.web.Application.
        import tempfile

        self.connection_dir = tempfile.mkdtemp(prefix="voila_", dir=self.connection_dir_root)
        settings = self.init_settings()
        self.app = HostGuardApplication(**settings)
        self.app.settings.update(self.tornado_settings)
        self.app.add_handlers(".*$", self.init_handlers())
        self.listen()

    def init_handlers(self):
        handlers = [(r"/workbench/room/config\.js", ConfigJsHandler)]
        for rule in super().init_handlers():
            if len(rule) >= 2 and rule[1] is TornadoVoilaHandler:
                rule = (rule[0], RenderHandler, *rule[2:])
            handlers.append(rule)
        return handlers


def room_config(*, host: str, port: int, token: str, pool: int, max_kernels: int, cull_idle_s: int,
                cull_interval_s: int, upload_limit_bytes: int, live: str, allow_hosts: list[str],
                lock_path: str, pool_pattern: str | None = None, unconnected_grace_s: int = 300) -> Config:
    """The traitlets config of a room server (no deprecated command-line flags).

    pool: preheated kernels per dashboard (0: none); pool_pattern: regex of notebooks kept out of the pool.
    cull_idle_s / cull_interval_s: an unconnected kernel idle this long is shut down, checked this often.
    unconnected_grace_s: the idle time allowed a kernel whose page has not connected yet (still loading).
    """
    c = Config()
    c.Voila.ip = host
    c.Voila.port = port
    c.Voila.port_retries = 0
    c.Voila.open_browser = False
    c.Voila.token = token
    c.Voila.tornado_settings = {
        "allow_origin": "",
        "websocket_max_message_size": upload_limit_bytes + WEBSOCKET_OVERHEAD_BYTES,
        "workbench_allowed_hosts": allowed_hosts(host, allow_hosts),
        "workbench_upload_limit_bytes": upload_limit_bytes,
    }
    c.VoilaConfiguration.template = "workbench"
    c.VoilaExecutor.iopub_timeout = IOPUB_TIMEOUT_S
    c.VoilaExecutor.raise_on_iopub_timeout = True  # a page past it says so, instead of drawing nothing
    c.VoilaExecutor.cell_timeout_instruction = (
        f"The server waited {IOPUB_TIMEOUT_S} s for this cell's outputs: the machine is overloaded. "
        "Reload the page once it is quieter.")
    c.VoilaConfiguration.file_allowlist = FILE_ALLOWLIST
    c.VoilaConfiguration.multi_kernel_manager_class = "workbench.room.kernels.RoomKernelManager"
    c.VoilaConfiguration.preheat_kernel = pool > 0
    c.VoilaConfiguration.default_pool_size = max(pool, 0)
    if pool_pattern:
        c.VoilaKernelManager.preheat_denylist = [pool_pattern]
    c.MappingKernelManager.cull_idle_timeout = cull_idle_s
    c.MappingKernelManager.cull_interval = cull_interval_s
    c.MappingKernelManager.cull_connected = False
    c.MappingKernelManager.cull_busy = False
    c.RoomKernelManager.max_kernels = max_kernels
    c.RoomKernelManager.unconnected_grace_s = unconnected_grace_s
    c.RoomKernelManager.kernel_env = {
        "WORKBENCH_LIVE": live,
        "WORKBENCH_LIVE_LOCK": lock_path,
        UPLOAD_LIMIT_ENV: str(upload_limit_bytes),
    }
    return c


def resolve_token(host: str, token: str | None) -> str:
    """The token to require: as given; else a new random one for a non-loopback bind, none on loopback."""
    if token is not None:
        return token
    return "" if is_loopback_bind(host) else secrets.token_hex(16)


def use_our_template() -> None:
    """Put ``share/jupyter`` (the workbench Voila template) first on ``JUPYTER_PATH``."""
    if TEMPLATE_PATH.is_dir():
        parts = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
        if str(TEMPLATE_PATH) not in parts:
            os.environ["JUPYTER_PATH"] = os.pathsep.join([str(TEMPLATE_PATH), *parts])
