"""Fixtures shared by several test modules."""
from __future__ import annotations

import pytest

from tests.fakes.anthropic_server import FakeAnthropic


@pytest.fixture
def fake():
    """A fake Anthropic Messages API on 127.0.0.1, scripted per test; records every request."""
    with FakeAnthropic() as server:
        yield server
