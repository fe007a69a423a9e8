"""The fuzz slice's shared worker: one process runs every case of the session (tests/support/fuzz_runner)."""

from __future__ import annotations

import pytest

from tests.support.fuzz_bases import bases
from tests.support.fuzz_runner import CliWorker


@pytest.fixture(scope="session")
def fuzz_worker():
    with CliWorker() as worker:
        yield worker


@pytest.fixture(scope="session")
def fuzz_bases():
    return bases()
