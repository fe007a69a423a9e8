"""Shared fixtures: a fake clock and toy pipelines, so timings are exact."""

from __future__ import annotations

import gc
import importlib.util
import itertools
import signal
from types import ModuleType
from pathlib import Path

import pytest

from workbench import Pipeline
from workbench.device import cuda_available

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


class FakeClock:
    """An injected clock: returns ``now`` (ns); stages advance it explicitly."""

    def __init__(self, start_ns: int = 1_000_000_000, tick_ns: int = 0):
        self.now = start_ns
        self.tick_ns = tick_ns

    def __call__(self) -> int:
        value = self.now
        self.now += self.tick_ns
        return value

    def advance(self, ns: int) -> None:
        self.now += ns


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


def toy_pipeline(
    clock: FakeClock, costs_ns: dict[str, int], fail: dict[str, set[int]] | None = None
) -> Pipeline:
    """Stages that advance the fake clock by fixed costs; ``fail[stage]`` holds item values that raise."""
    fail = fail or {}
    pipe = Pipeline("toy", items=lambda: itertools.count())

    def make(name: str, cost: int):
        def fn(batch):
            clock.advance(cost)
            if any(x in fail.get(name, ()) for x in batch):
                raise ValueError(f"{name} rejects {batch}")
            return batch

        return fn

    for name, cost in costs_ns.items():
        pipe.add(name, make(name, cost))
    return pipe


def streaming_pipeline(
    clock: FakeClock,
    *,
    prefill_ns: int = 5_000,
    step_ns: int = 1_000,
    growth_ns: int = 0,
    tokens: int = 4,
    tokenize_ns: int = 1_000,
    detokenize_ns: int = 300,
) -> Pipeline:
    """``tokenize`` -> ``generate`` (streaming: ``prefill_ns`` to the first token, then ``tokens - 1``
    decode steps, the one making token k costing ``step_ns + growth_ns * k``) -> ``detokenize``."""
    pipe = Pipeline("gen", items=lambda: itertools.count())

    @pipe.stage
    def tokenize(batch):
        clock.advance(tokenize_ns)
        return batch

    @pipe.stage(stream=True)
    def generate(batch):
        clock.advance(prefill_ns)
        for k in range(tokens):
            if k:
                clock.advance(step_ns + growth_ns * k)
            yield [k] * len(batch)

    @pipe.stage
    def detokenize(steps):
        clock.advance(detokenize_ns)
        return steps

    return pipe


TICKING = """
import itertools, os, time
from workbench import Pipeline


def build(config):
    pipe = Pipeline("ticking", items=lambda: itertools.count())

    @pipe.stage
    def forward(batch):
        with open(os.environ["WB_TICKS"], "a") as f:  # one line per call: the test waits on it
            f.write("x\\n")
        time.sleep(0.002)
        return batch

    return pipe
"""


def ticking_pipeline(folder: Path) -> tuple[str, Path]:
    """A pipeline file for a child process whose one stage takes 2 ms and writes a line to the file
    ``$WB_TICKS`` per call: ``("PATH:build", the ticks file to name in WB_TICKS)`` in ``folder``."""
    (folder / "ticking.py").write_text(TICKING)
    return f"{folder / 'ticking.py'}:build", folder / "ticks.txt"


# ``load`` of the ticking pipeline at 50 req/s for a minute, a request a batch on one thread: a
# signal ends it long before
TICKING_LOAD = ["--rate", "50", "--duration", "60", "--max-batch-size", "1", "--threads", "1"]


def lines(path: Path) -> int:
    """Lines in ``path`` so far (0 before it exists)."""
    return len(path.read_text().splitlines()) if path.exists() else 0


# The work of a planted lock holder, for the pipeline files that plant one (source text, placed
# between their imports and their build): 5-10 ms on CPU, so the waits' samples see the holder run.
CHECKSUM = """
def checksum(rows):  # pure Python that allocates no container: no collection of its own
    total = 0
    for _ in range(5):  # 5-10 ms on CPU over 20,000 rows (100,000 tracked tuples lengthened every
        for row in rows:  # collection enough to make a gc finding of their own)
            total += row[0] * row[1]
    return total
"""


def load_script(path: Path, name: str) -> ModuleType:
    """A script of ``benchmarks/`` or ``scripts/`` (not packages) imported from its file, as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sigint_as_from_a_terminal() -> None:
    """``preexec_fn`` for a child a test Ctrl-Cs: SIGINT at its default, as a shell gives a foreground command.

    A suite started as a background job (``make test &``, ``nohup ... &``) inherits SIGINT *ignored*,
    passes that on to its children, and Python then installs no KeyboardInterrupt handler: the child
    would run to its end and exit 0, as ``nohup``'d commands should.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none here)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="module")
def _frozen_heap():
    """After each test module, what is left of it and of what it imported collected once and frozen
    (``gc.freeze()``): each ``profile`` and ``load`` run makes a full collection before its first
    timed request (``timing.collect_set_up_garbage``), and in this process that traversed every
    object the suite had imported (``CI=true bash .ci/run`` in a fresh clone: the tests took 16 min
    10 s at 44ba0da, 14 min 45 s with this at b2a882c); frozen, a collection traverses only what
    the module at hand made."""
    yield
    gc.collect()
    gc.freeze()
