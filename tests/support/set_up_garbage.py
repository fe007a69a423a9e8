"""A pipeline whose warm-up leaves CPython owing a full collection, and a stage that counts them.

Its first call (a warm-up: a model loaded lazily) makes half again as many long-lived objects as
the process tracks (300,000 at least), with the collector off: once young collections have moved them to the oldest
generation they are more than a quarter of it, the condition under which CPython runs a full
(generation-2) collection, one traversal of the whole heap. Each call then keeps 1,000 lists
alive together (a young collection per call, nothing long-lived), so a run that does not collect
after its warm-up pays that full collection inside a measured request. ``full``: the count of
full collections (``gc.get_stats()[2]["collections"]``) at each call; ``loaded``: the count when
the first call's load ended.
"""

from __future__ import annotations

import gc
import itertools

from workbench import Pipeline


class SetUpGarbage:
    def __init__(self):
        self.full: list[int] = []
        self.loaded: int | None = None
        self.kept: list = []

    def build(self, config=None) -> Pipeline:
        pipe = Pipeline("set-up garbage", items=lambda: itertools.count())
        pipe.add("work", self.work)
        return pipe

    def work(self, batch):
        if self.loaded is None:
            gc.set_threshold(
                700, 10, 10
            )  # CPython's defaults (a test before may have changed them)
            gc.disable()
            try:
                # at least 300,000: the suite freezes its heap (tests/conftest.py), and the run's
                # own survivors must stay well under a quarter of the oldest generation
                self.kept = [[] for _ in range(max(len(gc.get_objects()), 200_000) * 3 // 2)]
            finally:
                gc.enable()
            self.loaded = gc.get_stats()[2]["collections"]
        self.full.append(gc.get_stats()[2]["collections"])
        young = [[] for _ in range(1_000)]  # alive together: a young collection each call
        return batch if young else None
