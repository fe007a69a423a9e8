"""The room's (Jupyter) kernel manager: a scratch folder per kernel, deleted with it; bounded counts.

(Jupyter kernels: the processes that run a page's notebook. GPU kernels are
:mod:`workbench.analysis.gpu_timeline`'s.)

Voila starts one kernel per page (or takes one from its preheated pool). Each
kernel gets its own folder under the server's scratch root, passed as
``TMPDIR``/``TEMP``/``TMP`` and ``WORKBENCH_SCRATCH_DIR``: uploads and trace
scratch folders made with :mod:`tempfile` land there and are deleted when the
kernel is shut down, culled or found dead, and the whole root when the server
stops. Culling itself is jupyter_server's (``cull_idle_timeout``,
``cull_interval``, ``cull_connected``), configured by the launcher, with one
change: a kernel no page has connected to yet is left alone for
``unconnected_grace_s``. Voila runs the notebook before the page loads its
scripts and connects; on a busy machine that gap passed 5 s for 8 pages at
once and 2 minutes for 30, and a plain culler shut those kernels down under
their loading pages.

So the grace runs from the end of the page's load, not from the kernel's
start: the render handler (:mod:`workbench_room.app`) tells this manager
which kernel its page got (:meth:`RoomKernelManager.claim`), when the page
finished loading (:meth:`rendered`) and when the page went away while still
loading (:meth:`abandoned`: the kernel is shut down at once). A kernel whose
page loaded and did not connect within ``unconnected_grace_s`` (30 s) is
shut down by the next cull check, idle or not. Plain GETs of a page (no
browser behind them) therefore hold a kernel for the render plus 30 s.

The room is shared: ``max_kernels`` counts kernels still starting (40 pages
at once started 42 kernels under a bound of 40), and
``max_kernels_per_client`` bounds the kernels one client address holds, its
pages being admitted included, loading, loaded or connected (one address
loading pages and connecting each websocket took all 40 kernels). A page
whose websocket is connected but which sent its kernel nothing for
``cull_connected_idle_s`` is culled, so what such a client holds comes back.
A class behind one NAT address looks like one client: the launcher's default
bound lets in a class the size of the largest pool (:mod:`workbench_room.app`).
Kernel ports come from :mod:`workbench_room.ports` (simultaneous starts took
each other's ports).

A preheated kernel's replacement (Voila's pool refill: a start whose environment
says ``VOILA_PREHEAT``) waits until the pages that got a kernel in the last
``refill_wait_s`` have drawn their first view (:meth:`RoomKernelManager.drawn`,
reported by the page), so that running the notebook again does not compete with
the page drawing on a small machine (about 1 s of `make dashboard`'s first figure
on 2 cores); a page that never reports holds it ``refill_wait_s`` at most.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path

from jupyter_server._tz import utcnow
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from tornado import web
from traitlets import Dict, Float, Integer, TraitError, Unicode
from voila.utils import ENV_VARIABLE

from .ports import use_kernel_ports

SCRATCH_ENV = "WORKBENCH_SCRATCH_DIR"


class RoomKernelManager(AsyncMappingKernelManager):
    """``AsyncMappingKernelManager`` with per-kernel scratch folders and ``max_kernels``."""

    max_kernels = Integer(
        0, config=True, help="Refuse a new kernel (HTTP 503) when this many run; 0: no bound."
    )
    scratch_root = Unicode(
        "",
        config=True,
        help="Folder holding each kernel's scratch folder (default: a new temp dir).",
    )
    unconnected_grace_s = Integer(
        30,
        config=True,
        help="Seconds after its page loaded (else after first seen) before a kernel no "
        "page has connected to is shut down.",
    )
    max_kernels_per_client = Integer(
        0,
        config=True,
        help="Kernels one client address may hold, pages being admitted included; one more "
        "page: HTTP 503. 0: no bound.",
    )
    max_unconnected_per_client = Integer(
        0,
        config=True,
        help="Kernels one client address may hold whose page loaded and never "
        "connected; one more page: HTTP 503. 0: no bound.",
    )
    cull_connected_idle_s = Integer(
        0,
        config=True,
        help="Shut down a kernel whose page is connected and sent it nothing (no kernel "
        "activity) for this many seconds. 0: never.",
    )
    refill_wait_s = Float(
        20.0,
        config=True,
        help="Seconds at most a preheated kernel's replacement waits for the pages that got a "
        "kernel in that time to draw their first view.",
    )
    kernel_env = Dict(
        {},
        config=True,
        help="Extra environment variables for every kernel (the room's live lock, upload limit).",
    )

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if not self.scratch_root:
            self.scratch_root = tempfile.mkdtemp(prefix="workbench-room-")
        Path(self.scratch_root).mkdir(parents=True, exist_ok=True)
        self._scratch: dict[str, str] = {}
        self._ever_connected: set[str] = set()
        self._unconnected_since: dict = {}  # kernel id -> when a cull check first saw it (never connected)
        self._client: dict[str, str] = {}  # kernel id -> the client address whose page got it
        self._loading: set[str] = set()  # kernels whose page is still loading
        self._rendered_at: dict[str, float] = {}  # kernel id -> when its page loaded (monotonic s)
        self._ending: set[str] = set()  # kernels being shut down now
        self._starting = 0  # kernels whose start is under way (not in len(self) yet)
        self._entering: dict[object, str] = {}  # ticket of a page admitted, no kernel yet -> client
        # kernel id -> when its page got it, until the page drew its first view
        self._drawing: dict[str, float] = {}
        self._drawn = asyncio.Event()  # set when a page reports its first view drawn
        self._clock = time.monotonic
        use_kernel_ports()

    def unconnected_count(self, client: str) -> int:
        """Kernels of ``client`` whose page loaded and has not connected (yet)."""
        return sum(
            1
            for k, c in self._client.items()
            if c == client and k in self._rendered_at and k not in self._ever_connected
        )

    def held_by(self, client: str) -> int:
        """Kernels ``client`` holds (loading, loaded or connected) plus its pages admitted without one yet."""
        return sum(c == client for c in self._client.values()) + sum(
            c == client for c in self._entering.values()
        )

    def admit(self, client: str) -> object:
        """A ticket for a new page of ``client`` (:meth:`claim` or :meth:`release` it); HTTP 503 when
        ``client`` holds ``max_kernels_per_client`` kernels, or ``max_unconnected_per_client`` whose
        page loaded and never connected."""
        held, unconnected = self.held_by(client), self.unconnected_count(client)
        if self.max_kernels_per_client and held >= self.max_kernels_per_client:
            raise web.HTTPError(
                503,
                f"{client} already holds {held} of the room's kernels (max_kernels_per_client="
                f"{self.max_kernels_per_client}); close one of its pages or try again later",
            )
        if self.max_unconnected_per_client and unconnected >= self.max_unconnected_per_client:
            raise web.HTTPError(
                503,
                f"{client} already has {unconnected} pages loaded and never connected "
                f"(max_unconnected_per_client={self.max_unconnected_per_client}); open one of them "
                f"or wait {self.unconnected_grace_s} s",
            )
        ticket = object()
        self._entering[ticket] = client
        return ticket

    def release(self, ticket: object) -> None:
        """The page admitted with ``ticket`` ended without a kernel (or went away): it no longer counts."""
        self._entering.pop(ticket, None)

    def claim(self, kernel_id: str, client: str, ticket: object = None) -> None:
        """A page of ``client`` (admitted with ``ticket``) got ``kernel_id`` and is loading."""
        self.release(ticket)
        self._client[kernel_id] = client
        self._loading.add(kernel_id)
        self._drawing[kernel_id] = self._clock()

    def drawn(self, kernel_id: str) -> None:
        """The page of ``kernel_id`` drew its first view: a refill waiting for it may start."""
        if self._drawing.pop(kernel_id, None) is not None:
            self._drawn.set()

    async def refill_turn(self) -> None:
        """Wait until no page that got a kernel in the last ``refill_wait_s`` is drawing its first view,
        ``refill_wait_s`` at most (pages that keep coming and never draw do not hold it longer)."""
        deadline = self._clock() + self.refill_wait_s
        while True:
            until = max((t + self.refill_wait_s for t in self._drawing.values()), default=0)
            left = min(until, deadline) - self._clock()
            if left <= 0:
                return
            self._drawn.clear()
            try:
                await asyncio.wait_for(self._drawn.wait(), left)
            except TimeoutError:
                return

    def rendered(self, kernel_id: str) -> None:
        """The page of ``kernel_id`` finished loading: the grace to connect starts now."""
        if kernel_id in self._loading:
            self._loading.discard(kernel_id)
            self._rendered_at[kernel_id] = time.monotonic()

    async def abandoned(self, kernel_id: str) -> None:
        """The page of ``kernel_id`` went away while loading: shut its kernel down now."""
        if kernel_id in self and kernel_id not in self._ever_connected:
            self.log.info("Shutting down kernel %s: its page was closed while loading", kernel_id)
            await self._shutdown_quietly(kernel_id)

    def scratch_dir(self, kernel_id: str) -> str | None:
        """The scratch folder of a running kernel (None once it has ended)."""
        return self._scratch.get(kernel_id)

    async def start_kernel(self, *args, **kwargs):
        if (kwargs.get("env") or {}).get(ENV_VARIABLE.VOILA_PREHEAT) == "True":
            await self.refill_turn()  # a pool's refill: after the pages drawing now
        running = len(self) + self._starting
        if self.max_kernels and running >= self.max_kernels:
            raise web.HTTPError(
                503,
                f"the room is full: {running} kernels are running or starting (max_kernels="
                f"{self.max_kernels}); close a page or try again in a minute",
            )
        scratch = tempfile.mkdtemp(prefix="kernel-", dir=self.scratch_root)
        env = dict(kwargs.get("env") or os.environ)
        env.update({str(k): str(v) for k, v in self.kernel_env.items()})
        env.update({SCRATCH_ENV: scratch, "TMPDIR": scratch, "TEMP": scratch, "TMP": scratch})
        kwargs["env"] = env
        self._starting += 1  # counted from here: a start under way is not in len(self) yet
        try:
            kernel_id = await super().start_kernel(*args, **kwargs)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        finally:
            self._starting -= 1
        self._scratch[kernel_id] = scratch
        return kernel_id

    async def shutdown_kernel(self, kernel_id, *args, **kwargs):
        """jupyter_server's, made idempotent: a second shutdown of a kernel ending (the page's own request,
        its close while loading, the culler) returns instead of raising KeyError in the culler's log."""
        if kernel_id in self._ending:
            return None
        self._ending.add(kernel_id)
        try:
            return await super().shutdown_kernel(kernel_id, *args, **kwargs)
        finally:
            self._ending.discard(kernel_id)
            self.remove_scratch(kernel_id)
            self._ever_connected.discard(kernel_id)
            self._loading.discard(kernel_id)
            self.drawn(kernel_id)
            for book in (self._unconnected_since, self._client, self._rendered_at):
                book.pop(kernel_id, None)

    async def _shutdown_quietly(self, kernel_id: str) -> None:
        """Shut a kernel down; one that another path ended meanwhile is no error (no traceback in the log)."""
        try:
            await self.shutdown_kernel(kernel_id, now=True)
        except (KeyError, web.HTTPError):
            # HTTPError 404: jupyter_server's word for an unknown kernel
            self.log.debug("kernel %s had already been shut down", kernel_id)

    def notify_connect(self, kernel_id):
        self._ever_connected.add(kernel_id)
        super().notify_connect(kernel_id)

    async def cull_kernel_if_idle(self, kernel_id):
        """jupyter_server's rule, except that a never-connected kernel gets ``unconnected_grace_s``.

        The grace runs from its last activity or from the first check that saw it, whichever is
        later: Voila's pool skips this method for pooled kernels, so a kernel preheated long ago
        and just handed to a loading page is first seen here now, with an old ``last_activity``.
        """
        kernel = self._kernels.get(kernel_id)
        if kernel is None or kernel_id in self._ending:
            return None  # shut down, or being shut down, since the check was scheduled
        last_activity = _last_activity(kernel)
        if last_activity is None:
            return None  # still starting: jupyter_server sets last_activity once the kernel is up
        if (
            kernel_id not in self._ever_connected
            and getattr(kernel, "execution_state", None) != "dead"
        ):
            if kernel_id in self._loading:
                return None  # its page is loading: closing the page releases it (abandoned)
            if kernel_id in self._rendered_at:
                waited = time.monotonic() - self._rendered_at[kernel_id]
                if waited <= self.unconnected_grace_s:
                    return None
                self.log.info(
                    "Culling kernel %s: its page loaded %.0f s ago and never connected",
                    kernel_id,
                    waited,
                )
                await self._shutdown_quietly(kernel_id)
                return None
            now = utcnow()
            idle_from = max(last_activity, self._unconnected_since.setdefault(kernel_id, now))
            if (now - idle_from).total_seconds() <= self.unconnected_grace_s:
                return None
        if self._silent_page(kernel_id, kernel, last_activity):
            await self._shutdown_quietly(kernel_id)
            return None
        try:
            return await super().cull_kernel_if_idle(kernel_id)
        except (KeyError, web.HTTPError):
            # ended between our look and jupyter_server's (which logged a traceback)
            self.log.debug("kernel %s ended before the cull check", kernel_id)
            return None

    def _silent_page(self, kernel_id: str, kernel, last_activity) -> bool:
        """Whether a page is connected to ``kernel_id`` and sent it nothing for ``cull_connected_idle_s``
        (a busy kernel is not silent); logs the cull."""
        if not (self.cull_connected_idle_s and self._kernel_connections.get(kernel_id, 0)):
            return False
        idle_s = (utcnow() - last_activity).total_seconds()
        if (
            idle_s <= self.cull_connected_idle_s
            or getattr(kernel, "execution_state", None) == "busy"
        ):
            return False
        self.log.info(
            "Culling kernel %s: its page is connected but sent nothing for %.0f s",
            kernel_id,
            idle_s,
        )
        return True

    def remove_scratch(self, kernel_id: str) -> None:
        """Delete a kernel's scratch folder (uploads, trace scratch) now."""
        scratch = self._scratch.pop(kernel_id, None)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)

    async def shutdown_all(self, *args, **kwargs):
        try:
            await super().shutdown_all(*args, **kwargs)
        finally:
            self._scratch.clear()
            shutil.rmtree(self.scratch_root, ignore_errors=True)


def _last_activity(kernel):
    """A kernel's ``last_activity``, or None while it starts (reading the unset trait raises TraitError)."""
    try:
        return kernel.last_activity
    except (AttributeError, TraitError):
        return None
