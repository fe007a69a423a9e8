"""A pipeline whose ``forward`` hangs on chosen items, for the timeout tests.

``forward`` blocks on :data:`RELEASE` for a batch holding any item in ``hang``.
Tests set ``RELEASE`` at teardown (the :func:`release_stuck_stages` fixture,
imported into a test module to use it), so no stage thread outlives its test.
``build`` is the same pipeline as a factory for ``--pipeline tests.hanging:build``,
the items to hang named by ``--option hang=[...]``.
"""

from __future__ import annotations

import itertools
import threading

import pytest

from workbench import Pipeline

RELEASE = threading.Event()


@pytest.fixture(autouse=True)
def release_stuck_stages():
    RELEASE.clear()
    yield
    RELEASE.set()


def hanging(hang: set[int]) -> Pipeline:
    """parse -> forward on the items 0, 1, 2, ...; forward blocks (until RELEASE) on a batch holding any of ``hang``."""
    pipe = Pipeline("hanging", items=lambda: itertools.count())
    pipe.add("parse", list)

    def forward(batch):
        if hang.intersection(batch):
            RELEASE.wait(60)
        return batch

    pipe.add("forward", forward)
    return pipe


def build(config) -> Pipeline:
    """The factory form: ``config.options["hang"]`` lists the items to hang on."""
    return hanging(set(config.options.get("hang", [])))
