"""One worker process per configuration for ``compare``: process-wide state stays in its own process.

Each rebuilds its pipeline from a *recipe* (:func:`recipe_of`), as pyperf does; request ``k`` of
batch size ``b`` gets items ``k*b .. k*b+b-1`` of the worker's own source. Pickled tuples over two
pipes, one reply each::

    ("build", sys_path, recipe, config, warmup, output_cap) -> ("ok", name, stage_names, torch_threads)
    ("warm",)                                              -> ("ok",)
    ("block", k, n)                                        -> ("ok", rows) | ("items", drawn)
    ("outputs",)                                           -> ("ok", {first item index: output})
    ("agree", A's outputs)                                 -> ("ok", agreement entry, analysis.outputs)
    ("error", "config" | "pipeline", message) in place of any reply;  end of input: the worker exits.

rows: ``workbench.timing.sample_row``'s. Between its blocks a worker is stopped (SIGSTOP), so an
idle configuration's threads take no core from the one measured; a worker silent for
:data:`REPLY_TIMEOUT_S` is killed. Workers ignore Ctrl-C: the parent kills what it started.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .analysis.outputs import NONE, output_agreement
from .device import require_torch
from .errors import ConfigError, PipelineError
from .noise import Readings, stat_ticks
from .examples import factory
from .pipeline import first_request_checked, load_factory, resolve_pipeline
from .timing import Clock, sample_row, stage_timer, stream_index

# the worker runs this very package, wherever it came from
_ROOT = str(Path(__file__).resolve().parents[1])
REPLY_TIMEOUT_S = 600.0  # one build, one warm-up or one block of 10 requests
EXIT_WAIT_S = 5.0  # after its pipes close, a worker has this long to exit before it is killed
REWARM = 3  # unmeasured requests after a torch thread-count switch (OpenMP's pool goes cold)


def recipe_of(target: Any) -> str | None:
    """``example:NAME``, ``MODULE:FUNC`` or ``FILE.py:FUNC`` to rebuild ``target`` from; None for a
    lambda, a nested function or one of ``__main__``."""
    if isinstance(target, str):
        return f"example:{target}"
    module = sys.modules.get(getattr(target, "__module__", None) or "")
    name = getattr(target, "__qualname__", "")
    if module is None or not name.isidentifier() or getattr(module, name, None) is not target:
        return None
    if module.__name__.startswith("workbench_user_"):  # loaded by --pipeline FILE.py:FUNC
        origin = getattr(module.__spec__, "origin", None)
        return f"{origin}:{name}" if origin else None
    if module.__name__ == "__main__" or module.__spec__ is None:
        return None
    return f"{module.__name__}:{name}"


def check_comparable(built: list[tuple[str, list[str]]]) -> None:
    """Every configuration's ``(pipeline name, stage names)`` is the first one's, or a ConfigError."""
    name0, names0 = built[0]
    for c, (name, names) in enumerate(built[1:], start=1):
        if name != name0 or names != names0:
            raise ConfigError(
                f"configuration {c} builds pipeline {name!r} with stages {names}, "
                f"configuration 0 {name0!r} with {names0}: not comparable"
            )


class WorkerReadings(Readings):
    """The noise probe's readings, the workers' CPU time counted as this run's own."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def own_ticks(self) -> int:
        ticks = super().own_ticks()
        for pid in self.pids:
            with contextlib.suppress(OSError):  # exited
                ticks += stat_ticks(f"/proc/{pid}/stat")
        return ticks


class Workers:
    """One worker per configuration, built; the methods of :class:`Local`."""

    def __init__(self, recipe: str, cfgs: list, labels: list[str], warmup: int, cap: int) -> None:
        self.labels, self.timeout_s, self.procs, self.conns = labels, REPLY_TIMEOUT_S, [], []
        try:
            for _ in cfgs:
                self._start()
            self.readings = WorkerReadings([p.pid for p in self.procs])
            built = [
                self.ask(c, ("build", list(sys.path), recipe, cfg, warmup, cap), "the build")
                for c, cfg in enumerate(cfgs)
            ]
            check_comparable([(name, names) for _, name, names, _ in built])
        except BaseException:
            self.close()
            raise
        _, self.pipeline, self.names, _ = built[0]
        self.threads = [b[3] for b in built]

    def _start(self) -> None:
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__, str(to_child), str(from_child)],
            pass_fds=(to_child, from_child),
            stdin=subprocess.DEVNULL,
            stdout=2,  # what stages print goes to stderr, never into a --json result
            env=dict(
                os.environ,
                PYTHONPATH=os.pathsep.join(filter(None, (_ROOT, os.environ.get("PYTHONPATH")))),
            ),
        )
        os.close(to_child)
        os.close(from_child)
        self.procs.append(proc)
        self.conns.append(
            (Connection(from_parent, readable=False), Connection(to_parent, writable=False))
        )

    def warm_up(self) -> None:
        for c in range(len(self.procs)):
            self.ask(c, ("warm",), "the warm-up")

    def block(self, c: int, k: int, n: int) -> list[tuple] | None:
        """Rows of requests ``k .. k+n-1`` of configuration ``c``; None when its items ran out."""
        reply = self.ask(c, ("block", k, n), f"round request {k}")
        if reply[0] == "items":
            self.drawn = reply[1]
            return None
        return reply[1]

    def ran_out(self) -> str:
        return f"pipeline {self.pipeline!r}: item source ran out after {self.drawn} items"

    def agreement(self) -> list[dict[str, Any]]:
        """Each configuration's outputs against A's, worked out in its own worker."""
        (_, reference) = self.ask(0, ("outputs",), "the outputs")
        others = [
            self.ask(c, ("agree", reference), "the outputs")[1] for c in range(1, len(self.procs))
        ]
        return [dict(NONE, items=0), *others]

    def ask(self, c: int, message: tuple, what: str) -> tuple:
        """The reply of worker ``c``; a PipelineError (or its ConfigError) when it failed."""
        send, recv = self.conns[c]
        try:
            self._signal(c, signal.SIGCONT)
            send.send(message)
            ready = recv.poll(self.timeout_s)
            reply = recv.recv() if ready else None
            # its threads (OpenMP's spinning pool, the factory's) wait too
            self._signal(c, signal.SIGSTOP)
        except (EOFError, OSError):
            try:
                code = self.procs[c].wait(EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                code = None
            raise PipelineError(
                f"configuration {self.labels[c]}: its worker process exited (code {code}) during {what}"
            ) from None
        if reply is None:
            self.procs[c].kill()
            raise PipelineError(
                f"configuration {self.labels[c]}: its worker process did not answer within "
                f"{self.timeout_s:g} s during {what}; killed"
            )
        if reply[0] == "error":
            kind = ConfigError if reply[1] == "config" else PipelineError
            raise kind(f"configuration {self.labels[c]}: {reply[2]}")
        return reply

    def _signal(self, c: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # exited: the reply (or absence) says why
            os.kill(self.procs[c].pid, sig)

    def close(self) -> None:
        """Close every pipe (a worker exits at its end); kill a worker still there after that."""
        for c, proc in enumerate(self.procs):
            if proc.poll() is None:
                self._signal(c, signal.SIGCONT)
        for send, recv in self.conns:
            send.close()
            recv.close()
        for proc in self.procs:
            try:
                proc.wait(EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Side:
    """One configuration's pipeline, its timer and the final outputs of its requests whose items
    start below ``cap``, by that first item's index (B's line up with A's item by item)."""

    def __init__(self, pipe, run, cap: int) -> None:
        self.pipe, self.run, self.cap, self.batch = pipe, run, cap, pipe.config.batch_size
        self.stream, self.outputs = stream_index(pipe.stages), {}

    def rows(self, k: int, n: int, items: list) -> list[tuple]:
        """Requests ``k .. k+n-1``, request ``i`` on ``items[i*batch : (i+1)*batch]``."""
        rows = []
        for i in range(k, k + n):
            first = i * self.batch
            t = self.run(items[first : first + self.batch])
            if first < self.cap and t.failure is None:  # converted outside every timed region
                self.outputs[first] = as_numpy(t.output)
            rows.append(sample_row(t, self.stream))
        return rows


class Local:
    """Configurations measured in this process (all of ``compare``'s when no worker can, or a
    worker's one), each on the first one's items, drawn as needed: every configuration sees the same."""

    readings = None  # the noise probe's default

    def __init__(self, build, cfgs: list, warmup: int, clock: Clock, cap: int) -> None:
        if any(c.threads for c in cfgs):
            require_torch()  # a thread count is set through torch
        self.pipes = [resolve_pipeline(build, cfg) for cfg in cfgs]
        check_comparable([(p.name, p.stage_names) for p in self.pipes])
        self.pipeline, self.names = self.pipes[0].name, self.pipes[0].stage_names
        self.source, self.items, self.warmup = self.pipes[0].item_iterator(), [], warmup
        self.batch = max(p.config.batch_size for p in self.pipes)
        self.need(warmup + REWARM)
        self.default_threads = current_threads()
        timers = [first_request_checked(stage_timer(p, clock), p) for p in self.pipes]
        self.sides = [Side(p, run, cap) for p, run in zip(self.pipes, timers)]
        self.threads = [p.config.threads or self.default_threads for p in self.pipes]

    def need(self, calls: int) -> bool:
        """Items for ``calls`` requests of the largest batch; False when the source ran out."""
        want = calls * self.batch
        if len(self.items) < want:
            self.items.extend(itertools.islice(self.source, want - len(self.items)))
        return len(self.items) >= want

    def warm_up(self) -> None:
        """``warmup`` requests per configuration, with its thread count, on the first items."""
        if not self.need(self.warmup):
            raise PipelineError(
                f"pipeline {self.pipeline!r}: item source ran out during the warm-up"
            )
        for c, side in enumerate(self.sides):
            _set_threads(self.threads[c])
            side.rows(0, self.warmup, self.items)

    def block(self, c: int, k: int, n: int) -> list[tuple] | None:
        """Rows of requests ``k .. k+n-1`` of configuration ``c``; None when the items ran out."""
        if not self.need(k + n):
            return None
        side = self.sides[c]
        if current_threads() != self.threads[c]:
            _set_threads(self.threads[c])
            for i in range(REWARM):
                side.run(self.items[i * side.batch : (i + 1) * side.batch])
        return side.rows(k, n, self.items)

    def ran_out(self) -> str:
        return f"pipeline {self.pipeline!r}: item source ran out after {len(self.items)} items"

    def agreement(self) -> list[dict[str, Any]]:
        a = self.sides[0]
        return [dict(NONE, items=0)] + [
            output_agreement(a.outputs, b.outputs, a.pipe.agree) for b in self.sides[1:]
        ]

    def close(self) -> None:
        _set_threads(self.default_threads)


def _set_threads(n: int | None) -> None:
    if n is not None and "torch" in sys.modules and sys.modules["torch"].get_num_threads() != n:
        sys.modules["torch"].set_num_threads(n)


class _Worker:
    """The child's side: a :class:`Local` of its one configuration."""

    def build(self, sys_path, recipe, config, warmup, cap) -> tuple:
        sys.path[:] = sys_path
        if config.threads:
            require_torch().set_num_threads(config.threads)
        example = recipe.removeprefix("example:")
        build = factory(example) if example != recipe else load_factory(recipe)
        self.local = Local(build, [config], warmup, time.perf_counter_ns, cap)
        return ("ok", self.local.pipeline, self.local.names, self.local.default_threads)

    def handle(self, message: tuple) -> tuple:
        kind = message[0]
        if kind == "build":
            return self.build(*message[1:])
        if kind == "warm":
            self.local.warm_up()
            return ("ok",)
        if kind == "block":
            rows = self.local.block(0, message[1], message[2])
            return ("items", len(self.local.items)) if rows is None else ("ok", rows)
        side = self.local.sides[0]
        if kind == "outputs":
            return ("ok", side.outputs)
        return ("ok", output_agreement(message[1], side.outputs, side.pipe.agree))


def current_threads() -> int | None:
    """torch's intra-op thread count; None when torch was never imported here."""
    if "torch" not in sys.modules:
        return None
    return sys.modules["torch"].get_num_threads()


def as_numpy(value: Any) -> Any:
    """A torch tensor as a float numpy array; lists and tuples element-wise."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().float().cpu().numpy()
    if isinstance(value, (list, tuple)):
        return type(value)(as_numpy(v) for v in value)
    return value


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it kills what it started
    # Linux: killed when the parent dies, even while stopped (best effort elsewhere)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    recv = Connection(int(argv[0]), writable=False)
    send = Connection(int(argv[1]), readable=False)
    worker = _Worker()
    while True:
        try:
            message = recv.recv()
        except EOFError:
            return 0
        try:
            reply = worker.handle(message)
        except Exception as exc:  # recorded and shown by the parent, never swallowed
            ours = isinstance(exc, (ConfigError, PipelineError))
            text = str(exc) if ours else f"{type(exc).__name__}: {exc}"
            reply = ("error", "config" if isinstance(exc, ConfigError) else "pipeline", text)
        try:
            send.send(reply)
        except OSError:  # the parent closed its end (interrupted, or it gave up on this worker)
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
