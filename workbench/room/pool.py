"""The room's preheated pool: sized per dashboard, refilled within the kernel budget, "ready" when executed.

A page that gets a preheated kernel whose notebook has already run is served the
rendered notebook at once; a page that gets a cold kernel waits for the kernel to
start and the notebook to execute (about 3 s of CPU for the latency explorer,
which imports torch and builds the model to match recorded runs), on cores that
29 other kernels want at the same moment. So the room preheats one kernel per
student for the dashboard it opens (``--students``), before the URL is handed
out, and says "ready" when every pooled notebook has finished executing:
Voila's own "pool is filled" line comes when the kernels have *started*.

Voila refills a pool one second after each page takes a kernel. Thirty pages
arriving together would start thirty more kernels during the rush (doubling
memory and competing for the cores with the pages being served); here a refill
is skipped while it would take the server past ``max_kernels``.
"""
from __future__ import annotations

import re
from pathlib import Path

PRESET = re.compile(r"^(?P<name>[^=]+)=(?P<size>\d+)$")


class RoomError(ValueError):
    """A ``--preheat`` argument that names no notebook or is not ``NAME=N``."""


def parse_preheat(items: list[str], root: Path) -> dict[str, int]:
    """``["latency_explorer=30"]`` -> ``{"dashboards/latency_explorer.ipynb": 30}`` (paths relative to ``root``).

    NAME is a notebook's stem or its path relative to the served folder, with or without ``.ipynb``;
    it must name exactly one notebook under ``root``.
    """
    notebooks = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.ipynb")
                       if ".ipynb_checkpoints" not in p.parts)
    sizes: dict[str, int] = {}
    for item in items:
        m = PRESET.match(item.strip())
        if not m:
            raise RoomError(f"--preheat {item!r}: expected NAME=N, e.g. latency_explorer=30")
        name = m.group("name").strip().removesuffix(".ipynb")
        found = [nb for nb in notebooks if nb.removesuffix(".ipynb") == name or Path(nb).stem == name]
        if len(found) != 1:
            what = "no notebook" if not found else f"{len(found)} notebooks ({', '.join(found)})"
            raise RoomError(f"--preheat {item!r}: {what} under {root} is called {name!r}")
        sizes[found[0]] = int(m.group("size"))
    return sizes


def pools_config(default_size: int, sizes: dict[str, int]) -> dict[str, dict]:
    """Voila's ``VoilaKernelManager.kernel_pools_config``: a default pool size and per-notebook sizes."""
    return {"default": {"pool_size": max(default_size, 0)}} | {nb: {"pool_size": n} for nb, n in sizes.items()}


def pool_progress(pools: dict[str, list]) -> tuple[int, int]:
    """(pooled kernels whose notebook has finished executing, pooled kernels) over Voila's pools.

    Each pool entry is an asyncio task giving ``{"task": render task, "kernel_id": ...}``; an entry
    counts as executed when both are done without error.
    """
    executed = total = 0
    for pool in pools.values():
        for entry in pool:
            total += 1
            if entry.done() and not entry.cancelled() and entry.exception() is None:
                render = entry.result().get("task")
                if render is not None and render.done() and not render.cancelled() and render.exception() is None:
                    executed += 1
    return executed, total


def pool_failures(pools: dict[str, list]) -> int:
    """Pool entries whose kernel did not start or whose notebook raised (Voila serves such a page broken)."""
    failed = 0
    for pool in pools.values():
        for entry in pool:
            if not entry.done() or entry.cancelled():
                continue
            if entry.exception() is not None:
                failed += 1
                continue
            render = entry.result().get("task")
            if render is not None and render.done() and (render.cancelled() or render.exception() is not None):
                failed += 1
    return failed


def pending_starts(pools: dict[str, list]) -> int:
    """Pool entries whose kernel has not started yet (a refill waiting or starting)."""
    return sum(1 for pool in pools.values() for entry in pool if not entry.done())


def refill_allowed(running: int, pending: int, max_kernels: int) -> bool:
    """Whether one more pooled kernel fits: running kernels plus starts under way stay below ``max_kernels``."""
    return not max_kernels or running + pending < max_kernels


def bounded_pool_class(base: type) -> type:
    """Voila's ``VoilaKernelManager`` (``base``) whose refills respect ``max_kernels``."""

    class RoomPoolKernelManager(base):
        def fill_if_needed(self, delay=None, notebook_name=None, extra_kernel_env_variables=None, **kwargs):
            pools = getattr(self, "_pools", {})
            if pools.get(notebook_name) is not None and not refill_allowed(
                    len(self), pending_starts(pools), getattr(self, "max_kernels", 0)):
                self.log.info("workbench room: pool of %s not refilled: %d kernels running, max_kernels=%d",
                              notebook_name, len(self), self.max_kernels)
                return None
            return super().fill_if_needed(delay=delay, notebook_name=notebook_name,
                                          extra_kernel_env_variables=extra_kernel_env_variables or {}, **kwargs)

    RoomPoolKernelManager.__name__ = RoomPoolKernelManager.__qualname__ = f"RoomPool{base.__name__}"
    return RoomPoolKernelManager
