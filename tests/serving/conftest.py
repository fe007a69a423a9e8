"""The ``served`` fixture: start real servers, kill any a test left running."""

import pytest

from served_helpers import PIPELINE, Served


@pytest.fixture
def served(tmp_path):
    servers = []

    def start(*extra, pipeline=PIPELINE):
        s = Served(tmp_path / f"server{len(servers)}", *extra, pipeline=pipeline)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.kill()
