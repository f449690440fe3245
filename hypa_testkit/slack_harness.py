"""The Slack bot as `hypa serve slack` builds it, over a toy index and SQLite, for tests and the bench.

Real everything (Components, StoredConversationService, ConversationStore on SQLite, SlackBot,
bot.http_app, uvicorn, slack_sdk's HTTP client) except the embedding model (HashingEmbedder) and
Slack itself (hypa_testkit/fakes/slack_server.py).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bot.configs import slack_config
from bot.metrics import Metrics
from bot.serve_chat import build_server
from bot.serve_slack import SlackServer, build_slack_server
from bot.settings import Settings
from bot.wiring import Components
from core.extractive import candidate_sentences
from hypa_testkit.fakes.slack_server import FakeSlack, SlackEvents, serve_in_thread
from hypa_testkit.toy import TOY_CHUNKS
from storage.embedder import HashingEmbedder

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy"
COLLECTION = "toy"


class ToyEmbedder(HashingEmbedder):
    """HashingEmbedder plus the token counter the pipeline needs (whitespace words)."""

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def toy_settings(data_dir: Path, api_base_url: str, **overrides) -> Settings:
    values = {
        "data_dir": data_dir, "collection": COLLECTION, "slack_bot_token": BOT_TOKEN,
        "slack_signing_secret": SIGNING_SECRET, "slack_app_token": "", "slack_api_base_url": api_base_url,
        "anthropic_api_key": "", "retrieval_config": "default", "database_url": "", "top_k": 3,
        "corpus_mirror": None,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


def toy_components(settings: Settings, *, indexed: bool = True) -> Components:
    """Components whose embedder is model-free; unless `indexed=False`, the toy chunks are indexed once
    per data dir."""
    components = Components(settings)
    components.embedder = ToyEmbedder()  # type: ignore[misc] - overrides the cached_property
    if indexed and COLLECTION not in components.index.collections():
        components.index.replace_document(COLLECTION, "toy-doc", "toy-v1", TOY_CHUNKS)
        components.sentence_vectors.add(candidate_sentences(TOY_CHUNKS))
    return components


def toy_slack_server(settings: Settings, components: Components, metrics: Metrics | None = None) -> SlackServer:
    """The server `hypa serve slack` builds (bot.serve_chat.build_server) over `components`."""
    return build_server(build_slack_server, slack_config(settings), components, metrics or Metrics())


@dataclass
class RunningBot:
    server: SlackServer
    components: Components
    base_url: str  # the app, e.g. http://127.0.0.1:PORT
    slack: SlackEvents  # signs and sends requests to {base_url}/slack/events

    @property
    def store(self):
        return self.components.store


@contextlib.contextmanager
def running_bot(data_dir: Path, fake: FakeSlack, **settings_overrides) -> Iterator[RunningBot]:
    """Build the server like `hypa serve slack` and serve it with uvicorn on 127.0.0.1.

    Leaving the block stops uvicorn, whose lifespan shutdown waits for answers in flight.
    """
    settings = toy_settings(data_dir, fake.base_url, **settings_overrides)
    components = toy_components(settings)
    server = toy_slack_server(settings, components)
    with serve_in_thread(server.http_app) as base_url:
        events = SlackEvents(f"{base_url}/slack/events", settings.slack_signing_secret)
        try:
            yield RunningBot(server, components, base_url, events)
        finally:
            events.close()
    components.store.close()
