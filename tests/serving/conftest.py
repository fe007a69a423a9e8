"""The ``served`` fixture: start real servers, kill any a test left running."""

import pytest

from served_helpers import Served


@pytest.fixture
def served(tmp_path):
    servers = []

    def start(*extra):
        s = Served(tmp_path / f"server{len(servers)}", *extra)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.kill()
