"""Fixtures for the example pipeline tests (helpers live in examples_helpers.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_thread():
    """Run with one torch thread, restored afterwards.

    The budget-shape tests compare stages of one pipeline. With the default two
    OpenMP threads, a busy neighbour process on a 2-core machine can stall every
    parallel region by a scheduler slice and invert the ordering; one thread
    keeps the comparison about the pipeline, not about the neighbours.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
