"""The room's kernel manager: a scratch folder per kernel, deleted with it; a bounded count.

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
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from tornado import web
from traitlets import Dict, Integer, Unicode

SCRATCH_ENV = "WORKBENCH_SCRATCH_DIR"


class RoomKernelManager(AsyncMappingKernelManager):
    """``AsyncMappingKernelManager`` with per-kernel scratch folders and ``max_kernels``."""

    max_kernels = Integer(0, config=True, help="Refuse a new kernel (HTTP 503) when this many run; 0: no bound.")
    scratch_root = Unicode("", config=True, help="Folder holding each kernel's scratch folder (default: a new temp dir).")
    unconnected_grace_s = Integer(300, config=True,
                                  help="Seconds idle before culling a kernel no page has connected to yet.")
    kernel_env = Dict({}, config=True, help="Extra environment variables for every kernel (the room's live lock, upload limit).")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if not self.scratch_root:
            self.scratch_root = tempfile.mkdtemp(prefix="workbench-room-")
        Path(self.scratch_root).mkdir(parents=True, exist_ok=True)
        self._scratch: dict[str, str] = {}
        self._ever_connected: set[str] = set()
        self._unconnected_since: dict = {}  # kernel id -> when a cull check first saw it (never connected)

    def scratch_dir(self, kernel_id: str) -> str | None:
        """The scratch folder of a running kernel (None once it has ended)."""
        return self._scratch.get(kernel_id)

    async def start_kernel(self, *args, **kwargs):
        if self.max_kernels and len(self) >= self.max_kernels:
            raise web.HTTPError(503, f"the room is full: {len(self)} kernels are running (max_kernels="
                                     f"{self.max_kernels}); close a page or try again in a minute")
        scratch = tempfile.mkdtemp(prefix="kernel-", dir=self.scratch_root)
        env = dict(kwargs.get("env") or os.environ)
        env.update({str(k): str(v) for k, v in self.kernel_env.items()})
        env.update({SCRATCH_ENV: scratch, "TMPDIR": scratch, "TEMP": scratch, "TMP": scratch})
        kwargs["env"] = env
        try:
            kernel_id = await super().start_kernel(*args, **kwargs)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self._scratch[kernel_id] = scratch
        return kernel_id

    async def shutdown_kernel(self, kernel_id, *args, **kwargs):
        try:
            return await super().shutdown_kernel(kernel_id, *args, **kwargs)
        finally:
            self.remove_scratch(kernel_id)
            self._ever_connected.discard(kernel_id)
            self._unconnected_since.pop(kernel_id, None)

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
        last_activity = _last_activity(kernel)
        if kernel is not None and last_activity is None:
            return None  # still starting: jupyter_server sets last_activity once the kernel is up
        if (kernel is not None and kernel_id not in self._ever_connected
                and getattr(kernel, "execution_state", None) != "dead"):
            from jupyter_server._tz import utcnow

            now = utcnow()
            idle_from = max(last_activity, self._unconnected_since.setdefault(kernel_id, now))
            if (now - idle_from).total_seconds() <= self.unconnected_grace_s:
                return None
        return await super().cull_kernel_if_idle(kernel_id)

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
    from traitlets import TraitError

    if kernel is None:
        return None
    try:
        return kernel.last_activity
    except (AttributeError, TraitError):
        return None
