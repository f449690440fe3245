"""`hypa serve slack`: settings checks, HTTP vs Socket Mode wiring, start-up checks, Socket Mode end to end."""
from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from aiohttp import WSMsgType, web
from starlette.routing import Route
from starlette.testclient import TestClient
from typer.testing import CliRunner

from bot.cli import app as cli
from bot.configs import slack_config
from bot.metrics import Metrics
from bot.serve_chat import ServeSetupError, warm_up
from bot.serve_slack import check_token, missing_settings, open_socket_mode, serve
from bot.settings import Settings
from hypa_testkit.fakes.slack_server import BOT_USER_ID, FakeSlack, envelope, mention_event
from hypa_testkit.slack_harness import toy_components, toy_settings, toy_slack_server

APP_TOKEN = "xapp-1-A0APP0001-1234-abcdef"


@pytest.fixture
def fake():
    with FakeSlack() as server:
        yield server


def _paths(http_app) -> set[str]:
    return {r.path for r in http_app.routes if isinstance(r, Route)}


def test_missing_tokens_are_listed_by_name():
    nothing = Settings(_env_file=None, slack_bot_token="", slack_signing_secret="", slack_app_token="")
    missing = missing_settings(nothing)
    assert [m.split()[0] for m in missing] == ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"]
    socket = Settings(_env_file=None, slack_bot_token="", slack_signing_secret="", slack_app_token=APP_TOKEN)
    assert [m.split()[0] for m in missing_settings(socket)] == ["SLACK_BOT_TOKEN"]  # no secret in Socket Mode
    with pytest.raises(ServeSetupError, match="SLACK_BOT_TOKEN"):
        serve(nothing)  # checked before anything loads


def test_cli_reports_what_is_missing_without_a_traceback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no .env here
    env = {"SLACK_BOT_TOKEN": "", "SLACK_SIGNING_SECRET": "", "SLACK_APP_TOKEN": "", "HYPA_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(cli, ["serve", "slack"], env=env)
    assert result.exit_code == 1
    assert "SLACK_BOT_TOKEN" in result.output and "SLACK_SIGNING_SECRET" in result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)


def test_cli_reports_a_collection_that_is_not_built(tmp_path, monkeypatch, fake):
    monkeypatch.chdir(tmp_path)
    # The command installs a root log handler on the (captured) stderr; keep other tests' logging intact.
    monkeypatch.setattr("bot.logging_setup.configure_logging", lambda settings: None)
    env = {"SLACK_BOT_TOKEN": "xoxb-1-2-3", "SLACK_SIGNING_SECRET": "s3cret", "SLACK_APP_TOKEN": "",
           "SLACK_API_BASE_URL": fake.base_url, "HYPA_DATA_DIR": str(tmp_path), "HYPA_COLLECTION": "ll144"}
    result = CliRunner().invoke(cli, ["serve", "slack"], env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "collection(s) 'll144' not in the index" in result.output and "hypa index build ll144" in result.output


def test_http_mode_mounts_events_next_to_health_and_metrics(tmp_path, fake):
    settings = toy_settings(tmp_path, fake.base_url)
    components = toy_components(settings)
    server = toy_slack_server(settings, components)
    assert server.mode == "http" and not server.config.socket_mode
    assert {"/slack/events", "/healthz", "/readyz", "/metrics"} <= _paths(server.http_app)
    components.store.close()


def test_socket_mode_is_chosen_by_the_app_token_and_runs_the_same_listeners(tmp_path, fake):
    http_settings = toy_settings(tmp_path / "a", fake.base_url)
    socket_settings = toy_settings(tmp_path / "b", fake.base_url, slack_app_token=APP_TOKEN, slack_signing_secret="")
    both = [toy_components(http_settings), toy_components(socket_settings)]
    http, socket = toy_slack_server(http_settings, both[0]), toy_slack_server(socket_settings, both[1])
    assert socket.mode == "socket" and socket.config.socket_mode
    assert "/slack/events" not in _paths(socket.http_app) and "/healthz" in _paths(socket.http_app)

    async def inspect_handler() -> None:  # the handler opens an aiohttp session: needs a running loop
        handler = socket.bot.socket_mode_handler(APP_TOKEN)
        assert handler.app is socket.bot.app and handler.client.app_token == APP_TOKEN
        assert handler.client.web_client.base_url == fake.base_url
        assert handler.handle in handler.client.socket_mode_request_listeners
        await handler.close_async()

    asyncio.run(inspect_handler())

    def listeners(bot) -> list[str]:
        return [listener.ack_function.__name__ for listener in bot.app._async_listeners]

    assert listeners(socket.bot) == listeners(http.bot) == [
        "_on_question", "_on_question", "_on_reaction_added", "_on_reaction_removed", "_on_feedback_button",
        "_on_command", "_on_share", "listener", "listener", "listener", "_on_reason_submitted",
        "_on_correction_submitted"]

    def middleware(bot):
        return [type(m).__name__ for m in bot.app._async_middleware_list]

    assert "AsyncRequestVerification" in middleware(http.bot)
    assert "AsyncRequestVerification" not in middleware(socket.bot)  # Socket Mode requests are not signed
    for components in both:
        components.store.close()


def test_start_up_checks_the_token_and_the_index(tmp_path, fake):
    settings = toy_settings(tmp_path, fake.base_url)
    identity = check_token(slack_config(settings))
    assert BOT_USER_ID in identity
    fake.fail_next("auth.test", error="invalid_auth")
    with pytest.raises(ServeSetupError, match="rejected SLACK_BOT_TOKEN.*invalid_auth"):
        check_token(slack_config(settings))
    components = toy_components(settings)
    warm_up(components)  # the toy collection is there

    empty = toy_settings(tmp_path / "empty", fake.base_url, collection="ll144")
    empty_components = toy_components(empty, indexed=False)
    empty_server = toy_slack_server(empty, empty_components)
    with pytest.raises(ServeSetupError, match="hypa index build ll144"):
        warm_up(empty_components)
    ready = TestClient(empty_server.http_app).get("/readyz")  # bot.health's checks, mounted by build_server
    assert ready.status_code == 503 and ready.json()["checks"] == {"index": False, "database": True, "answering": True}
    for c in (components, empty_components):
        c.store.close()


def test_unreachable_slack_api_is_a_clear_start_up_error(tmp_path, fake):
    settings = toy_settings(tmp_path, "http://127.0.0.1:9/api/")  # the discard port: connection refused
    config = dataclasses.replace(slack_config(settings), connection_retries=0)  # fail fast instead of retrying
    with pytest.raises(ServeSetupError, match="cannot reach the Slack API at http://127.0.0.1:9/api/"):
        check_token(config)


# --- Socket Mode end to end: a fake Socket Mode WebSocket (aiohttp) + the fake Web API -----------


class FakeSocketModeServer:
    """Slack's Socket Mode endpoint: sends `hello`, then the scripted envelopes; records the acks."""

    def __init__(self, envelopes: list[dict]) -> None:
        self.envelopes = envelopes
        self.acks: list[dict] = []
        self.acked = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0APP0001"}})
        for item in self.envelopes:
            await ws.send_json(item)
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                self.acks.append(json.loads(msg.data))
                if len(self.acks) >= len(self.envelopes):
                    self.acked.set()
        return ws

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/link", self._socket)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"ws://127.0.0.1:{port}/link"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def test_socket_mode_end_to_end(tmp_path: Path, fake: FakeSlack):
    event = mention_event(f"<@{BOT_USER_ID}> What is the civil penalty for a first violation?")
    body = envelope(event)
    socket_envelopes = [
        {"envelope_id": "env-1", "type": "events_api", "accepts_response_payload": False, "retry_attempt": 0,
         "retry_reason": "", "payload": body},
        # Slack re-sends an envelope it thinks was not acknowledged: same event_id, a retry attempt.
        {"envelope_id": "env-2", "type": "events_api", "accepts_response_payload": False, "retry_attempt": 1,
         "retry_reason": "timeout", "payload": body},
    ]
    settings = toy_settings(tmp_path, fake.base_url, slack_app_token=APP_TOKEN, slack_signing_secret="")
    components = toy_components(settings)
    server = toy_slack_server(settings, components, metrics=Metrics())

    async def scenario() -> list[dict]:
        socket_server = FakeSocketModeServer(socket_envelopes)
        await socket_server.start()
        fake.socket_mode_url = socket_server.url
        handler = await open_socket_mode(server.bot)
        try:
            await asyncio.wait_for(socket_server.acked.wait(), 10)
            await asyncio.to_thread(fake.wait_for, lambda: fake.calls_to("chat.update"), 10)
            assert await server.bot.tasks.drain(10)
        finally:
            await handler.close_async()
            await socket_server.stop()
        return socket_server.acks

    acks = asyncio.run(scenario())
    assert sorted(a["envelope_id"] for a in acks) == ["env-1", "env-2"]
    assert [c.token for c in fake.calls_to("apps.connections.open")] == [APP_TOKEN]
    placeholder = fake.calls_to("chat.postMessage")
    assert len(placeholder) == 1 and placeholder[0].params["thread_ts"] == event["ts"]
    update = fake.calls_to("chat.update")
    assert len(update) == 1 and "$500" in update[0].params["text"]
    components.store.close()


# --- the app manifest -----------------------------------------------------------------------------

MANIFESTS = {mode: Path(__file__).resolve().parent.parent / "adapters" / "slack" / name
             for mode, name in (("socket", "manifest.yml"), ("http", "manifest.http.yml"))}
# Every Web API method the bot calls, and the scope each needs (None: the method needs none). chat:write
# covers the chat.* posts; conversations.history (the review channel's post) needs the history scope of
# the channel's kind, which the message events need anyway.
BOT_API_METHODS = {"chat.postMessage": "chat:write", "chat.update": "chat:write", "chat.delete": "chat:write",
                   "chat.postEphemeral": "chat:write", "chat.getPermalink": None, "views.open": None,
                   "conversations.history": "channels:history", "conversations.replies": "channels:history",
                   "response_url": None}
# Every event subscription, and the scope Slack requires for it.
EVENT_SCOPES = {"app_mention": "app_mentions:read", "message.channels": "channels:history",
                "message.groups": "groups:history", "message.im": "im:history", "message.mpim": "mpim:history",
                "reaction_added": "reactions:read", "reaction_removed": "reactions:read"}
COMMAND_SCOPE = "commands"


@pytest.mark.parametrize("mode", ["socket", "http"])
def test_manifest_asks_for_exactly_the_scopes_its_events_commands_and_calls_need(mode):
    import yaml

    manifest = yaml.safe_load(MANIFESTS[mode].read_text(encoding="utf-8"))
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert sorted(events) == sorted(EVENT_SCOPES)
    assert scopes == set(EVENT_SCOPES.values()) | {s for s in BOT_API_METHODS.values() if s} | {COMMAND_SCOPE}
    (command,) = manifest["features"]["slash_commands"]
    assert command["command"] == "/hypa" and command["should_escape"] is False
    assert manifest["settings"]["interactivity"]["is_enabled"] is True  # buttons and modals
    assert manifest["features"]["app_home"]["messages_tab_enabled"] is True  # people can DM the bot
    assert manifest["features"]["app_home"]["messages_tab_read_only_enabled"] is False
    urls = [manifest["settings"]["event_subscriptions"].get("request_url"),
            manifest["settings"]["interactivity"].get("request_url"), command.get("url")]
    if mode == "socket":  # the default: no public URL at all
        assert manifest["settings"]["socket_mode_enabled"] is True and urls == [None, None, None]
    else:
        assert manifest["settings"]["socket_mode_enabled"] is False
        assert all(url.endswith("/slack/events") for url in urls)


def test_the_two_manifests_differ_only_in_how_slack_reaches_the_bot():
    import yaml

    def without_urls(path: Path) -> dict:
        m = yaml.safe_load(path.read_text(encoding="utf-8"))
        m["settings"]["event_subscriptions"].pop("request_url", None)
        m["settings"]["interactivity"].pop("request_url", None)
        m["features"]["slash_commands"][0].pop("url", None)
        m["settings"].pop("socket_mode_enabled")
        return m

    assert without_urls(MANIFESTS["socket"]) == without_urls(MANIFESTS["http"])


def test_the_bot_calls_only_the_web_api_methods_the_manifest_covers(tmp_path, fake):
    """Drive every code path that talks to Slack and compare the methods used with BOT_API_METHODS."""
    from hypa_testkit.fakes.slack_server import block_actions, message_event, reaction_event
    from hypa_testkit.slack_harness import running_bot

    with running_bot(tmp_path, fake) as bot:
        event = mention_event(f"<@{BOT_USER_ID}> What is the civil penalty for a first violation?")
        bot.slack.send(envelope(event))
        answer = fake.wait_for(lambda: [m for m in fake.thread(event["channel"], event["ts"]) if m.edits])[0]
        bot.slack.send(envelope(message_event("thanks, and the notice period?", thread_ts=event["ts"])))
        bot.slack.send(envelope(reaction_event("reaction_added", "+1", channel=event["channel"], ts=answer.ts)))
        answer_id = answer.blocks[-1]["elements"][0]["value"]
        bot.slack.send_interaction(block_actions("feedback_up", answer_id, channel=event["channel"],
                                                 message_ts=answer.ts))
        fake.wait_for(lambda: fake.calls_to("chat.postEphemeral"))
        fake.wait_quiet(0.3)
        _drive_the_review_loop(bot, fake, event, answer, answer_id)
    used = {c.method for c in fake.calls} - {"auth.test"}  # auth.test needs no scope
    assert used <= set(BOT_API_METHODS), used
    assert {"views.open", "chat.getPermalink", "conversations.history", "response_url"} <= used  # driven


def _drive_the_review_loop(bot, fake, event, answer, answer_id) -> None:
    """/hypa, Share, 👎 + reason, Ask a person, and a reviewer's correction, through the bot's review channel."""
    from hypa_testkit.fakes.slack_server import block_actions, slash_command, view_submission

    bot.server.bot.review.review_channel = "C0REVIEW1"
    bot.slack.send_command(slash_command("What is a widget audit?", response_url=fake.response_url("c1")))
    private = fake.wait_for(lambda: fake.responses("c1"))[0]
    share = next(e["value"] for b in private["blocks"] if b["type"] == "actions" for e in b["elements"])
    bot.slack.send_interaction(block_actions("share_answer", share, channel="C0GENERAL", message_ts="1.1",
                                             is_ephemeral=True, response_url=fake.response_url("s1")))
    fake.wait_for(lambda: fake.responses("s1"))
    bot.slack.send_interaction(block_actions("feedback_down", answer_id, channel=event["channel"], message_ts=answer.ts))
    view = fake.wait_for(lambda: fake.views)[0]["view"]
    bot.slack.send_interaction(view_submission(view, {"reason_kind": {"choice": {"selected_option": {"value": "other"}}}}))
    post = fake.wait_for(lambda: [m for m in fake.messages.values() if m.channel == "C0REVIEW1"])[0]
    bot.slack.send_interaction(block_actions("review_correct", answer_id, channel="C0REVIEW1", message_ts=post.ts,
                                             user="ULEAD001"))
    modal = fake.wait_for(lambda: fake.views[1:])[0]["view"]
    bot.slack.send_interaction(view_submission(modal, {
        "correct_answer": {"text": {"value": "Right."}}, "provision": {"text": {"value": "§ 1"}},
        "post_in_thread": {"choice": {"selected_options": [{"value": "post"}]}}}, user="ULEAD001"))
    fake.wait_for(lambda: [m for m in fake.messages.values() if m.channel == "C0REVIEW1" and m.edits])
    fake.wait_quiet(0.3)


def test_a_rejected_app_token_stops_socket_mode_with_a_clear_error(tmp_path: Path, fake: FakeSlack):
    settings = toy_settings(tmp_path, fake.base_url, slack_app_token=APP_TOKEN, slack_signing_secret="")
    components = toy_components(settings)
    server = toy_slack_server(settings, components)
    fake.fail_next("apps.connections.open", error="invalid_auth")
    with pytest.raises(ServeSetupError, match="rejected SLACK_APP_TOKEN.*invalid_auth.*connections:write"):
        asyncio.run(open_socket_mode(server.bot))
    components.store.close()


def test_cli_reports_a_database_that_cannot_be_opened_without_a_traceback(tmp_path, monkeypatch, fake):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("bot.logging_setup.configure_logging", lambda settings: None)
    env = {"SLACK_BOT_TOKEN": "xoxb-1-2-3", "SLACK_SIGNING_SECRET": "s3cret", "SLACK_APP_TOKEN": "",
           "SLACK_API_BASE_URL": fake.base_url,  # the token is checked (and accepted) before the database opens
           "HYPA_DATA_DIR": str(tmp_path), "HYPA_DATABASE_URL": "nosuchdb://admin:hunter2@db.internal/hypa"}
    result = CliRunner().invoke(cli, ["serve", "slack"], env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "cannot open the database nosuchdb://admin:***@db.internal/hypa" in " ".join(result.output.split())
    assert "hunter2" not in result.output and "Traceback" not in result.output


def test_shutdown_disconnects_socket_mode_before_draining_answers_in_flight(tmp_path: Path, fake: FakeSlack):
    """Events acknowledged after the drain would never be answered: Socket Mode stops taking them first."""
    settings = toy_settings(tmp_path, fake.base_url, slack_app_token=APP_TOKEN, slack_signing_secret="")
    components = toy_components(settings)
    server = toy_slack_server(settings, components)
    bot = server.bot
    seen: dict[str, bool] = {}

    async def scenario() -> None:
        async with bot.lifespan():
            handler = bot.socket_mode_handler(APP_TOKEN)
            release = asyncio.Event()

            async def answer_in_flight() -> None:
                await release.wait()
                seen["disconnected_while_draining"] = handler.client.closed

            bot.tasks.spawn(answer_in_flight())
            asyncio.get_running_loop().call_later(0.05, release.set)
        assert bot.tasks.pending == 0

    asyncio.run(scenario())
    assert seen == {"disconnected_while_draining": True}
    components.store.close()


def test_socket_mode_slash_command_is_acked_with_the_ephemeral_placeholder_and_answered_privately(tmp_path: Path,
                                                                                                  fake: FakeSlack):
    """The manifest's default: /hypa over Socket Mode, acknowledged on the socket, answered at the response_url."""
    from adapters.slack.blocks import PLACEHOLDER_TEXT
    from hypa_testkit.fakes.slack_server import slash_command

    fields = slash_command("What is the civil penalty for a first violation?", response_url=fake.response_url("sm"))
    envelopes = [{"envelope_id": "env-cmd", "type": "slash_commands", "accepts_response_payload": True,
                  "payload": fields}]
    settings = toy_settings(tmp_path, fake.base_url, slack_app_token=APP_TOKEN, slack_signing_secret="")
    components = toy_components(settings)
    server = toy_slack_server(settings, components, metrics=Metrics())

    async def scenario() -> list[dict]:
        socket_server = FakeSocketModeServer(envelopes)
        await socket_server.start()
        fake.socket_mode_url = socket_server.url
        handler = await open_socket_mode(server.bot)
        try:
            await asyncio.wait_for(socket_server.acked.wait(), 10)
            await asyncio.to_thread(fake.wait_for, lambda: fake.responses("sm"), 10)
            assert await server.bot.tasks.drain(10)
        finally:
            await handler.close_async()
            await socket_server.stop()
        return socket_server.acks

    (ack,) = asyncio.run(scenario())
    assert ack == {"envelope_id": "env-cmd", "payload": {"text": PLACEHOLDER_TEXT, "response_type": "ephemeral"}}
    (answer,) = fake.responses("sm")
    assert answer["response_type"] == "ephemeral" and "$500" in answer["text"]
    assert fake.calls_to("chat.postMessage") == []
    components.store.close()
