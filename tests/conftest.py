"""Fixtures shared by several test modules."""
from __future__ import annotations

import os

import pytest

from bot.settings import Settings
from hypa_testkit.fakes.anthropic_server import FakeAnthropic

# Settings a developer's machine or shell may carry that would change what the code under test does
# (an API key turns answers into Claude's, a token starts a bot). HYPA_TEST_* and WEAVIATE_URL are how
# a run opts into the PostgreSQL and live-Weaviate tests, so they stay.
_MACHINE_SETTINGS = (
    "ANTHROPIC_API_KEY", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN",
    "TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_URL", "TELEGRAM_WEBHOOK_SECRET",
)


@pytest.fixture(autouse=True)
def clean_settings(monkeypatch):
    """Every test starts from the defaults: no HYPA_* or service credentials from the environment, and
    no `.env` from the working directory (a test sets what it needs itself)."""
    for name in list(os.environ):
        if (name.startswith("HYPA_") and not name.startswith("HYPA_TEST_")) or name in _MACHINE_SETTINGS:
            monkeypatch.delenv(name)
    # Tuning the embedding model before a fresh index takes minutes on the real corpora: tests that
    # build an index do it with the package's model; tests/test_embedding_tuning.py turns it on.
    monkeypatch.setenv("HYPA_TUNE_EMBEDDINGS", "false")
    monkeypatch.setitem(Settings.model_config, "env_file", None)


@pytest.fixture
def fake():
    """A fake Anthropic Messages API on 127.0.0.1, scripted per test; records every request."""
    with FakeAnthropic() as server:
        yield server
