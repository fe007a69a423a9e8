"""A tiny generate-like pipeline for the served streaming tests: ``{"x": k, "n": units}`` in, one unit
per step (a list of one token per request of the batch, 2 ms apart), then the whole answer as JSON.
``x == -1`` raises after its second unit; ``x == -3`` raises before its first; ``"pad": n`` makes each
of its units a string of n characters (a stream a client can stop reading)."""

import itertools
import json
import time

from workbench import Pipeline

STEP_S = 0.002


def build(config):
    pipe = Pipeline(
        "tinygen",
        items=lambda: (json.dumps({"x": k, "n": 4}).encode() for k in itertools.count()),
        config=config,
    )

    @pipe.stage
    def parse(batch):
        return [json.loads(b) for b in batch]

    @pipe.stage(stream=True)
    def generate(rows):
        if any(r["x"] == -3 for r in rows):
            raise ValueError("x=-3 fails before its first token")
        for step in range(max(r["n"] for r in rows)):
            if step == 2 and any(r["x"] == -1 for r in rows):
                raise ValueError("x=-1 fails after two tokens")
            time.sleep(STEP_S)
            yield [unit(r, step) for r in rows]

    @pipe.stage
    def detokenize(steps):
        return [json.dumps({"tokens": list(t)}).encode() for t in zip(*steps)]

    return pipe


def unit(row, step):
    return "u" * row["pad"] if row.get("pad") else row["x"] * 10 + step
