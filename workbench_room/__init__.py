"""One Voila server for a room: our launcher around Voila 0.5.

``python -m workbench_room`` serves the dashboards (``make dashboard``) or the
dashboards and notebooks for a workshop room (``make room``). Around plain
Voila it adds what a server handed to strangers needs:

* a Host allow-list, always on (stops DNS rebinding of a 127.0.0.1 server):
  :mod:`workbench_serve.hosts` (shared with ``workbench serve``);
* a token for any non-loopback bind, printed in the URL to hand out;
* kernels of closed pages shut down (the page's own shutdown request gets its
  ``_xsrf`` cookie) or culled when idle and unconnected, each kernel with a
  scratch folder (``TMPDIR``, ``WORKBENCH_SCRATCH_DIR``) deleted when it ends,
  bounded kernel counts (in all, and per client connected or not) and connected
  but silent pages culled: :mod:`workbench_room.kernel_manager`;
* kernel ports that simultaneous starts do not collide on: :mod:`workbench_room.ports`;
* websockets behind the token, a page's unread bytes bounded: :mod:`workbench_room.websockets`;
* live profiling one at a time across the server: :mod:`workbench_room.live_queue` (the latency
  explorer takes its ``live_slot`` through the wing's hook, ``workbench.wings.hook``).

Nothing here is imported by ``import workbench``; only the launcher imports Voila.
"""

from .live_queue import live_slot
