"""Fixtures of the widget tests (the fakes live in widget_fakes.py)."""

from __future__ import annotations

import pytest
from widget_fakes import FakeProfile


@pytest.fixture
def fake_profile() -> FakeProfile:
    return FakeProfile()
