"""`hypa serve telegram`: clear errors (no traceback) for missing settings and a token Telegram rejects."""
from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.configs import telegram_config
from bot.serve_chat import ServeSetupError
from bot.serve_telegram import check_token, missing_settings
from bot.settings import Settings
from hypa_testkit.fakes.telegram_server import FakeTelegram


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no stray .env
    return {
        "HYPA_DATA_DIR": str(tmp_path / "data"), "TELEGRAM_BOT_TOKEN": "", "TELEGRAM_WEBHOOK_URL": "",
        "TELEGRAM_WEBHOOK_SECRET": "", "TELEGRAM_API_BASE_URL": "https://api.telegram.org/bot",
    }


def _serve(env: dict, **overrides: str):
    return CliRunner().invoke(app, ["serve", "telegram"], env={**env, **overrides})


def test_missing_token_is_a_clear_error(env):
    result = _serve(env)
    assert result.exit_code == 1
    assert "TELEGRAM_BOT_TOKEN" in result.output and "BotFather" in result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)  # fail(), not a crash


def test_webhook_without_secret_lists_everything_missing(env):
    result = _serve(env, TELEGRAM_WEBHOOK_URL="https://bot.example.com/telegram/webhook")
    assert result.exit_code == 1
    assert "TELEGRAM_BOT_TOKEN" in result.output and "TELEGRAM_WEBHOOK_SECRET" in result.output
    assert "Traceback" not in result.output
    settings = Settings(telegram_bot_token="1:x", telegram_webhook_url="https://h/telegram/hook", _env_file=None)
    missing = missing_settings(settings)
    assert len(missing) == 1 and missing[0].startswith("TELEGRAM_WEBHOOK_SECRET (is required")
    bad = Settings(telegram_bot_token="1:x", telegram_webhook_url="http://h/hook", telegram_webhook_secret="has space",
                   _env_file=None)
    assert [m.split(" ")[0] for m in missing_settings(bad)] == ["TELEGRAM_WEBHOOK_SECRET", "TELEGRAM_WEBHOOK_URL"]
    good = Settings(telegram_bot_token="1:x", telegram_webhook_url="https://h/hook", telegram_webhook_secret="ok_-9",
                    _env_file=None)
    assert missing_settings(good) == []


def test_a_token_telegram_rejects_is_a_clear_error(env):
    with FakeTelegram() as fake:  # the fake answers 401 to any other token, as Telegram does
        result = _serve(env, TELEGRAM_BOT_TOKEN="999:not-the-token", TELEGRAM_API_BASE_URL=fake.base_url)
        assert [c.method for c in fake.calls] == []  # 401s are not recorded as API calls
    assert result.exit_code == 1
    assert "Telegram rejected TELEGRAM_BOT_TOKEN" in result.output and "Traceback" not in result.output


def test_check_token_returns_the_bot_username_and_explains_an_unreachable_api():
    with FakeTelegram() as fake:
        settings = Settings(telegram_bot_token=fake.token, telegram_api_base_url=fake.base_url, _env_file=None)
        assert check_token(telegram_config(settings)) == "@" + fake.bot_user["username"]
        assert [c.method for c in fake.calls] == ["getMe"]
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(telegram_bot_token="1:x", telegram_api_base_url=f"http://127.0.0.1:{port}/bot", _env_file=None)
    with pytest.raises(ServeSetupError, match="cannot reach the Telegram Bot API"):
        check_token(telegram_config(settings))


def test_a_webhook_url_telegram_refuses_is_a_clear_error_before_serving():
    with FakeTelegram() as fake:
        fake.fail_next("setWebhook", 400, "Bad Request: bad webhook: HTTPS url must be provided for webhook")
        settings = Settings(telegram_bot_token=fake.token, telegram_api_base_url=fake.base_url,
                            telegram_webhook_url="https://bot.example.com/telegram/webhook",
                            telegram_webhook_secret="s3cret", _env_file=None)
        with pytest.raises(ServeSetupError, match="(?i)Telegram refused TELEGRAM_WEBHOOK_URL .*https url must be provided"):
            check_token(telegram_config(settings))
        fake.calls.clear()
        assert check_token(telegram_config(settings)) == "@" + fake.bot_user["username"]  # accepted the second time
        assert [c.method for c in fake.calls] == ["getMe", "setWebhook"]
        assert fake.webhook["secret_token"] == "s3cret"
