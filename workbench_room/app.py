"""The launcher: Voila with a Host allow-list, a token off loopback, culling and scratch cleanup.

Voila 0.5.13 standalone hard-codes ``allow_remote_access=True``, so jupyter's
own Host check never runs; :class:`HostGuardApplication` checks every request
(pages, static files, websockets) before routing, and answers 403 to a Host it
does not know. The page's shutdown request on close carries the ``_xsrf``
cookie only if one was set, and Voila's render handler never sets it (the
``403 '_xsrf' argument missing`` on every close): :class:`RenderHandler` sets
it, so the kernel is shut down at once. Culling catches what the page cannot
report (a crashed browser, a dropped network).

The render handler also tells the kernel manager which kernel its page got,
when the page finished loading and when it went away while loading (see
:mod:`workbench_room.kernel_manager`), and refuses a client holding its share
of the room's kernels. The token covers every path that serves the room's
content: ``/voila/files/``, our ``config.js`` and every websocket
(``/voila/query/`` included) need it like the pages (Voila serves the first
two and the query socket without it); only the login page and the template,
static and extension assets (Voila's and JupyterLab's own code, the same for
everyone) are open. ``/logout`` and odd paths under ``/voila/templates/``
answer a redirect or 404, never 500.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

import tornado.web
from jupyter_server.base.handlers import JupyterHandler
from tornado.ioloop import IOLoop
from traitlets.config import Config
from voila.app import Voila
from voila.static_file_handler import AllowListFileHandler, TemplateStaticFileHandler
from voila.request_info_handler import RequestInfoSocketHandler
from voila.tornado.handler import TornadoVoilaHandler
from voila.tornado.kernel_websocket_handler import VoilaKernelWebsocketHandler

from workbench_serve.hosts import allowed_hosts, host_allowed, is_loopback_bind
from .websockets import (
    WEBSOCKET_UNREAD_LIMIT_BYTES,
    KernelSocketHandler,
    PlainErrors,
    QuerySocketHandler,
)

REPO = Path(__file__).resolve().parents[1]
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
        self.finish(
            f"403: Host {self.request.host!r} is not served here (DNS rebinding guard; "
            "the server's --allow-host adds a name)\n"
        )


class HostGuardApplication(tornado.web.Application):
    """A tornado Application that routes only requests whose Host is in ``settings['workbench_allowed_hosts']``."""

    def find_handler(self, request, **kwargs):
        allowed = self.settings.get("workbench_allowed_hosts", frozenset())
        if not host_allowed(request.headers.get("Host"), allowed):
            return self.get_handler_delegate(request, ForbiddenHostHandler)
        return super().find_handler(request, **kwargs)


class _PageKernels:
    """The kernel manager as one page's render sees it: tells the page which kernel it got."""

    def __init__(self, manager, page: "RenderHandler"):
        self._manager, self._page = manager, page

    def __getattr__(self, name):
        return getattr(self._manager, name)

    async def start_kernel(self, *args, **kwargs):
        kernel_id = await self._manager.start_kernel(*args, **kwargs)
        self._page.got_kernel(kernel_id)
        return kernel_id

    async def get_rendered_notebook(self, *args, **kwargs):  # a kernel from the preheated pool
        render_task, rendered, kernel_id = await self._manager.get_rendered_notebook(
            *args, **kwargs
        )
        self._page.got_kernel(kernel_id)
        return render_task, rendered, kernel_id


class RenderHandler(TornadoVoilaHandler):
    """Voila's page handler: sets the ``_xsrf`` cookie the page's shutdown beacon sends back, refuses a
    client holding its share of kernels (503), and reports its kernel's page loading to the manager."""

    _kernel_id: str | None = None
    _ticket: object = None  # the manager's admission of this page, until it has a kernel
    _gone = False

    @property
    def kernel_manager(self):
        return _PageKernels(self.settings["kernel_manager"], self)

    @property
    def _rooms(self):
        manager = self.settings["kernel_manager"]
        return manager if hasattr(manager, "claim") else None

    async def prepare(self):
        await super().prepare()
        if self._finished:
            return
        self.xsrf_token  # noqa: B018 - reading it sets the cookie (tornado)
        if self._rooms is not None:
            try:
                self._ticket = self._rooms.admit(self.request.remote_ip)
            except tornado.web.HTTPError as refused:
                self.set_status(503)
                self.set_header("Content-Type", "text/plain; charset=utf-8")
                self.set_header("Retry-After", str(self._rooms.unconnected_grace_s))
                self.finish(f"503: {refused.log_message}\n")

    def got_kernel(self, kernel_id: str) -> None:
        self._kernel_id = kernel_id
        if self._rooms is not None:
            self._rooms.claim(kernel_id, self.request.remote_ip, self._ticket)
            if self._gone:  # the page went away while the kernel started
                IOLoop.current().spawn_callback(self._rooms.abandoned, kernel_id)

    async def get(self, path=None):
        try:
            await super().get(path)
        finally:
            if self._kernel_id is not None and self._rooms is not None and not self._gone:
                self._rooms.rendered(self._kernel_id)

    def on_connection_close(self):
        self._gone = True
        if self._rooms is not None:
            self._rooms.release(self._ticket)
            if self._kernel_id is not None:
                IOLoop.current().spawn_callback(self._rooms.abandoned, self._kernel_id)
        super().on_connection_close()

    def on_finish(self):
        if self._rooms is not None:
            self._rooms.release(self._ticket)  # a page that got no kernel (an error) counts no more
        super().on_finish()


class TokenFileHandler(JupyterHandler, AllowListFileHandler):
    """Voila's ``/voila/files/`` handler behind the room's token (Voila's own serves them to anyone)."""


class TemplateFileHandler(TemplateStaticFileHandler):
    """Voila's template asset handler, answering 404 (not 500) to a path that is not ``NAME/static/FILE``."""

    def parse_url_path(self, path):
        try:
            return super().parse_url_path(path)
        except (ValueError, AssertionError):
            raise tornado.web.HTTPError(404) from None

    @classmethod
    def get_absolute_path(cls, root, path):
        try:
            return super().get_absolute_path(root, path)
        except (ValueError, AssertionError):
            raise tornado.web.HTTPError(404) from None


class LogoutHandler(JupyterHandler):
    """``/logout``: forget the login cookie and go to the login page (jupyter_server's renders a template
    Voila does not ship: a 500)."""

    def get(self):
        self.identity_provider.clear_login_cookie(self)
        self.redirect(self.settings.get("login_url", "/login"))


class ConfigJsHandler(JupyterHandler):
    """``/workbench/room/config.js``: the page's upload limit, read by our template's script (token required)."""

    def get(self):
        limit = int(self.settings["workbench_upload_limit_bytes"])
        self.set_header("Content-Type", "application/javascript; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(f"window.workbenchUploadLimitBytes = {limit};\n")


class DrawnHandler(PlainErrors, JupyterHandler):
    """``POST /workbench/room/drawn/KERNEL_ID``: the page of that kernel drew its first view (our template's
    script says so); the pool's refill waits for it (:meth:`RoomKernelManager.drawn`). 204, token required."""

    def post(self, kernel_id):
        manager = self.settings["kernel_manager"]
        if hasattr(manager, "drawn"):
            manager.drawn(kernel_id)
        self.set_status(204)
        self.finish()


class RoomVoila(Voila):
    """Voila, with our Application class, render handler and config script."""

    name = "workbench-room"

    def start(self):
        # Voila.start with HostGuardApplication in place of tornado.web.Application.
        self.connection_dir = tempfile.mkdtemp(prefix="voila_", dir=self.connection_dir_root)
        settings = self.init_settings()
        self.app = HostGuardApplication(**settings)
        self.app.settings.update(self.tornado_settings)
        self.app.add_handlers(".*$", self.init_handlers())
        self.listen()

    def init_handlers(self):
        handlers = [
            (r"/workbench/room/config\.js", ConfigJsHandler),
            (r"/workbench/room/drawn/([0-9a-f-]{36})", DrawnHandler),
        ]
        ours = {
            TornadoVoilaHandler: RenderHandler,
            AllowListFileHandler: TokenFileHandler,
            TemplateStaticFileHandler: TemplateFileHandler,
            VoilaKernelWebsocketHandler: KernelSocketHandler,
            RequestInfoSocketHandler: QuerySocketHandler,
        }
        for rule in super().init_handlers():
            if len(rule) >= 2 and rule[1] in ours:
                rule = (rule[0], ours[rule[1]], *rule[2:])
            elif len(rule) >= 2 and str(rule[0]).endswith("/logout"):
                rule = (rule[0], LogoutHandler, *rule[2:])
            handlers.append(rule)
        return handlers


def room_config(
    *,
    host: str,
    port: int,
    token: str,
    pool: int,
    max_kernels: int,
    cull_idle_s: int,
    cull_interval_s: int,
    upload_limit_bytes: int,
    live: str,
    allow_hosts: list[str],
    lock_path: str,
    pool_pattern: str | None = None,
    pools: dict[str, int] | None = None,
    refill_delay_s: float = 1.0,
    refill_wait_s: float = 20.0,
    unconnected_grace_s: int = 30,
    max_kernels_per_client: int | None = None,
    max_unconnected_per_client: int = 0,
    cull_connected_idle_s: int = 0,
    ws_unread_limit_bytes: int = WEBSOCKET_UNREAD_LIMIT_BYTES,
) -> Config:
    """The traitlets config of a room server (no deprecated command-line flags).

    pool: preheated kernels per dashboard (0: none); pool_pattern: regex of notebooks kept out of the pool.
    pools: pool sizes of single dashboards, by their path relative to the served folder (Voila's names):
    a class of 30 on one dashboard preheats 30 kernels for it, not 30 for every dashboard.
    refill_delay_s: seconds after a page takes a preheated kernel before its replacement starts (Voila's
    ``fill_delay``): a class arriving at once would otherwise start as many kernels while its pages load.
    refill_wait_s: at most how long a replacement then waits for the pages drawing their first view.
    cull_idle_s / cull_interval_s: an unconnected kernel idle this long is shut down, checked this often.
    unconnected_grace_s: how long after its page loaded a kernel no page connected to is kept.
    max_kernels_per_client: kernels one client address may hold, connected or not (0: none; None:
    :func:`kernels_per_client`'s default). max_unconnected_per_client: of those, kernels whose page loaded
    and never connected (0: no separate bound). cull_connected_idle_s: a kernel whose page is connected and
    sent it nothing this long is shut down (0: never).
    ws_unread_limit_bytes: bytes a page may leave unread on its kernel websocket before it is closed.
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
        "workbench_ws_unread_limit_bytes": ws_unread_limit_bytes,
    }
    c.VoilaConfiguration.template = "workbench"
    c.VoilaExecutor.iopub_timeout = IOPUB_TIMEOUT_S
    c.VoilaExecutor.raise_on_iopub_timeout = True  # a page past it says so, not drawing nothing
    c.VoilaExecutor.cell_timeout_instruction = (
        f"The server waited {IOPUB_TIMEOUT_S} s for this cell's outputs: the machine is overloaded. "
        "Reload the page once it is quieter."
    )
    c.VoilaConfiguration.file_allowlist = FILE_ALLOWLIST
    c.VoilaConfiguration.multi_kernel_manager_class = (
        "workbench_room.kernel_manager.RoomKernelManager"
    )
    pools = pools or {}
    c.VoilaConfiguration.preheat_kernel = pool > 0 or any(n > 0 for n in pools.values())
    c.VoilaConfiguration.default_pool_size = max(pool, 0)
    c.VoilaKernelManager.kernel_pools_config = {"default": {"pool_size": max(pool, 0)}} | {
        name: {"pool_size": n} for name, n in pools.items()
    }
    c.VoilaKernelManager.fill_delay = refill_delay_s
    if pool_pattern:
        c.VoilaKernelManager.preheat_denylist = [pool_pattern]
    c.MappingKernelManager.cull_idle_timeout = cull_idle_s
    c.MappingKernelManager.cull_interval = cull_interval_s
    c.MappingKernelManager.cull_connected = False
    c.MappingKernelManager.cull_busy = False
    c.RoomKernelManager.max_kernels = max_kernels
    c.RoomKernelManager.refill_wait_s = refill_wait_s
    c.RoomKernelManager.unconnected_grace_s = unconnected_grace_s
    c.RoomKernelManager.max_unconnected_per_client = max_unconnected_per_client
    c.RoomKernelManager.max_kernels_per_client = (
        kernels_per_client(max_kernels, [pool, *pools.values()])
        if max_kernels_per_client is None
        else max_kernels_per_client
    )
    c.RoomKernelManager.cull_connected_idle_s = cull_connected_idle_s
    c.RoomKernelManager.kernel_env = {
        "WORKBENCH_LIVE": live,
        "WORKBENCH_LIVE_LOCK": lock_path,
        UPLOAD_LIMIT_ENV: str(upload_limit_bytes),
    }
    return c


def kernels_per_client(max_kernels: int, pool_sizes: list[int]) -> int:
    """The default bound on one client address's kernels: the largest pool (a class behind one NAT
    address opening the dashboard it was sized for) or half of ``max_kernels``, whichever is more, so
    another address always finds the other half; 0 (no bound) when ``max_kernels`` is 0."""
    if not max_kernels:
        return 0
    return min(max_kernels, max([max_kernels // 2, *pool_sizes]))


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
