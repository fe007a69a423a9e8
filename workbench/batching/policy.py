"""The dispatch rule, shared by the live batcher and the simulator (times in integer ns, passed in).

Requests queue in arrival order. The next batch closes at

    close = max(min(oldest + max_wait, arrival of the max_batch_size-th queued), slot_free)

and takes the queued requests that arrived by then, at most ``max_batch_size``. ``oldest +
max_wait`` is Triton's ``max_queue_delay``; ``slot_free`` is back-pressure: at most one closed batch
waits for an executor, so under a backlog batches are full and the capacity is ``concurrency *
max_batch_size / mean service time(max_batch_size)``. A request's wait splits (:func:`wait_split`)
into ``batch_wait``, until the rule alone would dispatch (at most ``max_wait``), and
``queue_wait``, the wait for a busy executor.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..units import NS_PER_MS


@dataclass(frozen=True)
class BatchPolicy:
    """max_batch_size (>= 1), max_wait_ms (>= 0) and concurrency (executors, >= 1)."""

    max_batch_size: int
    max_wait_ms: float
    concurrency: int = 1

    def __post_init__(self) -> None:
        b, w, c = self.max_batch_size, self.max_wait_ms, self.concurrency
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ConfigError(
                f"max_batch_size must be an integer >= 1 (--max-batch-size), got {b!r}"
            )
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise ConfigError(f"max_wait_ms must be a number >= 0 (--max-wait-ms), got {w!r}")
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise ConfigError(f"concurrency must be an integer >= 1 (--concurrency), got {c!r}")

    @property
    def max_wait_ns(self) -> int:
        return int(round(self.max_wait_ms * NS_PER_MS))

    def params(self) -> dict[str, Any]:
        return asdict(self) | {"max_wait_ms": float(self.max_wait_ms)}


class BatchFormer:
    """The request queue and the dispatch rule (no threads, no clock)."""

    def __init__(self, policy: BatchPolicy):
        self.policy = policy
        self._queue: deque[tuple[Any, int]] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def push(self, request: Any, arrival_ns: int) -> None:
        """Queue a request; arrivals must not go back in time."""
        if self._queue and arrival_ns < self._queue[-1][1]:
            raise ValueError(
                f"arrival {arrival_ns} is earlier than the last queued one {self._queue[-1][1]}"
            )
        self._queue.append((request, arrival_ns))

    def due_ns(self) -> int | None:
        """When the rule alone would dispatch the next batch; None when nothing is queued."""
        if not self._queue:
            return None
        b = self.policy.max_batch_size
        due = self._queue[0][1] + self.policy.max_wait_ns
        if len(self._queue) >= b:
            due = min(due, self._queue[b - 1][1])
        return due

    def close_ns(self, slot_free_ns: int) -> int | None:
        """When the next batch closes given what is queued now; None when nothing is."""
        due = self.due_ns()
        return None if due is None else max(due, slot_free_ns)

    def pop(self, close_ns: int) -> list[tuple[Any, int]]:
        """Remove and return the batch closing at ``close_ns``: (request, arrival_ns) pairs."""
        out = []
        while (
            self._queue and len(out) < self.policy.max_batch_size and self._queue[0][1] <= close_ns
        ):
            out.append(self._queue.popleft())
        return out

    def drain(self) -> list[tuple[Any, int]]:
        """Remove and return everything still queued (a run that stops early)."""
        out = list(self._queue)
        self._queue.clear()
        return out


def wait_split(arrival_ns, due_ns, close_ns, start_ns):
    """``(batch_wait_ns, queue_wait_ns)``, adding up to ``start - arrival``: batch wait to the
    batch's ``due`` (None: its close), or none for a request that joined after it; on ints or
    numpy arrays."""
    if due_ns is None:
        end = close_ns
    else:
        end = np.minimum(np.maximum(due_ns, arrival_ns), close_ns)
        end = int(end) if np.ndim(end) == 0 else end
    return end - arrival_ns, start_ns - end
