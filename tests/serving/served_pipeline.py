"""A small pipeline for the served tests: JSON in, JSON out, ``x == -1`` raises in forward,
``x == -2`` sleeps 300 ms (long enough for a client to hang up)."""

import itertools
import json
import time

from workbench import Pipeline


def build(config):
    pipe = Pipeline(
        "echo", items=lambda: (json.dumps({"x": k}).encode() for k in itertools.count())
    )

    @pipe.stage
    def parse(batch):
        return [json.loads(b) for b in batch]

    @pipe.stage
    def forward(rows):
        time.sleep(0.001)
        if any(r["x"] == -2 for r in rows):
            time.sleep(0.3)
        if any(r["x"] == -1 for r in rows):
            raise ValueError("x=-1 is poison")
        return [{"y": r["x"] * 2} for r in rows]

    @pipe.stage
    def serialize(rows):
        return [json.dumps(r).encode() for r in rows]

    return pipe
