"""Every chat platform has one shape (issue 16, item 3; docs/ADAPTERS.md): a `bot/serve_<name>.py` module
with `missing_settings`, `check_token`, `build_<name>_server` (a typed config from bot/configs.py, never
Settings) and a `PLATFORM` record, run by `bot.serve_chat.serve_chat` in one order, with one setup error
(`ServeSetupError`) that `hypa serve <name>` prints as a message without a traceback.

The behaviour of each platform's steps is tested in tests/test_slack_serve.py and
tests/test_telegram_serve.py; this module checks that both have the same shape and order, so a third
platform has one example to copy.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from bot.cli import app as cli
from bot.serve_chat import ChatPlatform, ServeSetupError
from bot.settings import Settings
from hypa_testkit.fakes.slack_server import FakeSlack
from hypa_testkit.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("slack", "telegram")


def _module(name: str):
    return importlib.import_module(f"bot.serve_{name}")


@pytest.mark.parametrize("name", PLATFORMS)
def test_each_platform_module_has_the_parts_of_the_template(name):
    import bot.configs

    module = _module(name)
    platform = module.PLATFORM
    assert isinstance(platform, ChatPlatform) and platform.name == name
    assert platform.missing_settings is module.missing_settings
    assert platform.check_token is module.check_token
    assert platform.build_server is getattr(module, f"build_{name}_server")
    assert platform.config is getattr(bot.configs, f"{name}_config")  # built in the one place configs are
    assert list(inspect.signature(module.serve).parameters) == ["settings"]


def test_the_builders_take_a_typed_config_and_the_same_arguments():
    from adapters.slack import SlackConfig
    from adapters.telegram import TelegramConfig

    signatures = {name: inspect.signature(getattr(_module(name), f"build_{name}_server")) for name in PLATFORMS}

    def shape(sig: inspect.Signature) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in sig.parameters.values()]

    assert shape(signatures["slack"]) == shape(signatures["telegram"])
    assert [p for p in signatures["slack"].parameters][:2] == ["config", "service"]
    configs = {name: sig.parameters["config"].annotation for name, sig in signatures.items()}
    assert configs == {"slack": SlackConfig.__name__, "telegram": TelegramConfig.__name__}  # never Settings


def test_hypa_serve_has_a_command_per_platform():
    from bot.cli_serve import serve_app

    assert sorted(c.name for c in serve_app.registered_commands) == sorted(PLATFORMS)


@pytest.mark.parametrize("name", PLATFORMS)
def test_missing_settings_are_the_one_setup_error(name):
    nothing = Settings(_env_file=None, slack_bot_token="", slack_signing_secret="", slack_app_token="",
                       telegram_bot_token="")
    with pytest.raises(ServeSetupError, match=f"^hypa serve {name} needs:\n  [A-Z]+_BOT_TOKEN"):
        _module(name).serve(nothing)


def test_no_platform_defines_a_setup_error_of_its_own():
    found = []
    for path in sorted((ROOT / "bot").glob("serve_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith(("Error", "Exception")) for b in node.bases):
                found.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert found == ["bot/serve_chat.py: ServeSetupError"]


@pytest.mark.parametrize("name", PLATFORMS)
def test_a_rejected_token_is_reported_before_anything_slow_loads(name, tmp_path, monkeypatch):
    """Step 2 (the platform accepts the credentials) comes before loading the index: a wrong token is
    one line in a second, here with no index built at all (step 3 would report that)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("bot.logging_setup.configure_logging", lambda settings: None)
    env = {"HYPA_DATA_DIR": str(tmp_path / "data"), "HYPA_COLLECTION": "ll144"}
    if name == "slack":
        fake_server: FakeSlack | FakeTelegram = FakeSlack()
        env |= {"SLACK_BOT_TOKEN": "xoxb-1-2-3", "SLACK_SIGNING_SECRET": "s3cret", "SLACK_APP_TOKEN": ""}
    else:
        fake_server = FakeTelegram()
        env |= {"TELEGRAM_BOT_TOKEN": "999:not-the-token"}  # the fake answers 401, as Telegram does
    with fake_server as fake:
        if isinstance(fake, FakeSlack):
            env["SLACK_API_BASE_URL"] = fake.base_url
            fake.fail_next("auth.test", error="invalid_auth")
        else:
            env["TELEGRAM_API_BASE_URL"] = fake.base_url
        result = CliRunner().invoke(cli, ["serve", name], env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert f"rejected {name.upper()}_BOT_TOKEN" in " ".join(result.output.split())
    assert "not in the index" not in result.output and "Traceback" not in result.output


# --- the whole of `hypa serve <name>`: the steps in order, then serving until stopped ----------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("name", PLATFORMS)
def test_serve_runs_the_steps_in_order_then_answers_until_stopped(name, tmp_path, monkeypatch):
    """serve_chat end to end over the toy index: settings, token, server, index, then uvicorn on
    HYPA_HTTP_PORT with /readyz ready and a question answered through the real client library."""
    import bot.serve_chat as serve_chat
    from hypa_testkit.fakes.slack_server import BOT_USER_ID, SlackEvents, envelope, mention_event
    from hypa_testkit.fakes.telegram_server import message, private_chat
    from hypa_testkit.slack_harness import SIGNING_SECRET, toy_components, toy_settings

    steps: list[str] = []
    uvicorn_servers = []

    def recorded(step: str, fn):
        def call(*args, **kwargs):
            steps.append(step)
            return fn(*args, **kwargs)
        return call

    def http_server(app, http, **kwargs):  # the real one, kept so the test can stop it
        uvicorn_servers.append(serve_chat.http_server(app, http, **kwargs))
        return uvicorn_servers[-1]

    monkeypatch.setattr("bot.logging_setup.configure_logging", lambda settings: None)  # keep pytest's logging
    monkeypatch.setattr("bot.wiring.Components", recorded("components", toy_components))  # model-free embedder
    monkeypatch.setattr(serve_chat, "build_server", recorded("build_server", serve_chat.build_server))
    monkeypatch.setattr(serve_chat, "warm_up", recorded("warm_up", serve_chat.warm_up))
    monkeypatch.setattr(f"bot.serve_{name}.http_server", http_server)
    module = _module(name)
    platform = dataclasses.replace(
        module.PLATFORM, missing_settings=recorded("missing_settings", module.missing_settings),
        check_token=recorded("check_token", module.check_token), run=recorded("run", module.PLATFORM.run),
    )
    port = _free_port()
    fake_server = FakeSlack() if name == "slack" else FakeTelegram()
    with fake_server as fake:
        overrides = {"http_host": "127.0.0.1", "http_port": port}
        if isinstance(fake, FakeTelegram):
            overrides |= {"telegram_bot_token": fake.token, "telegram_api_base_url": fake.base_url}
        settings = toy_settings(tmp_path, fake.base_url, **overrides)
        failed: list[BaseException] = []

        def serve() -> None:
            try:
                serve_chat.serve_chat(platform, settings)
            except BaseException as exc:  # noqa: BLE001 - reported by the test below
                failed.append(exc)

        thread = threading.Thread(target=serve, name=f"hypa-serve-{name}", daemon=True)
        thread.start()
        try:
            ready = _wait_until_ready(f"http://127.0.0.1:{port}", thread, failed)
            assert steps == ["missing_settings", "check_token", "components", "build_server", "warm_up", "run"]
            assert ready["ready"] is True and {"index", "database", "answering"} <= set(ready["checks"])
            if isinstance(fake, FakeSlack):
                event = mention_event(f"<@{BOT_USER_ID}> What is the civil penalty for a first violation?")
                events = SlackEvents(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET)
                assert events.send(envelope(event)).status_code == 200
                events.close()
                answer = fake.wait_for(lambda: [m for m in fake.thread(event["channel"], event["ts"]) if m.edits])[0]
                assert "$500" in answer.text
            else:
                assert ready["checks"]["telegram"] is True  # polling
                fake.push_updates(message(update_id=1, message_id=10, chat=private_chat(4242),
                                          text="What is the civil penalty for a first violation?"))
                fake.wait_for("editMessageText", timeout=20)
                assert "$500" in fake.bot_messages(4242)[-1]["text"]
        finally:
            if uvicorn_servers:
                uvicorn_servers[0].should_exit = True  # what SIGTERM does
            thread.join(30)
    assert not thread.is_alive() and failed == []


def _wait_until_ready(base_url: str, thread: threading.Thread, failed: list[BaseException]) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if failed or not thread.is_alive():
            raise AssertionError(f"serve stopped: {failed!r}")
        try:
            response = httpx.get(f"{base_url}/readyz", timeout=2)
            if response.status_code == 200:
                return response.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("the bot did not become ready within 60 s")
