"""Structured logs: one JSON object per line, no secrets, no message text unless HYPA_LOG_MESSAGE_TEXT."""
from __future__ import annotations

import io
import json
import logging

import pytest

from bot.logging_setup import REDACTED, Redactor, configure_logging, secret_values
from bot.settings import Settings

SLACK_TOKEN = "xoxb-1111-2222-abcdefABCDEF"
TELEGRAM_TOKEN = "123456789:AAHfake_telegram_token_abcdefghijklmn"
SIGNING_SECRET = "8f14e45fceea167a5a36dedd4bea2543"
WEAVIATE_KEY = "wv-Key-0123456789"


def _settings(**overrides) -> Settings:
    values = dict(
        log_format="json", slack_bot_token=SLACK_TOKEN, telegram_bot_token=TELEGRAM_TOKEN,
        slack_signing_secret=SIGNING_SECRET, weaviate_api_key=WEAVIATE_KEY,
        database_url="postgresql://hypa:s3cret-pw@db:5432/hypa",
    )
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def capture():
    """Configure logging into a buffer; restore the root logger afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()

    def install(settings: Settings) -> io.StringIO:
        configure_logging(settings, stream)
        return stream

    yield install
    for handler in root.handlers[:]:
        if handler not in saved[0]:
            root.removeHandler(handler)
    root.setLevel(saved[1])


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_one_json_object_per_line_with_extra_fields(capture):
    stream = capture(_settings())
    log = logging.getLogger("hypa.test")
    log.info("answered %s in %d ms", "msg-1", 42, extra={"platform": "slack", "latency_ms": 42.5})
    log.warning("multi\nline message")
    first, second = _lines(stream)
    assert first["message"] == "answered msg-1 in 42 ms" and first["level"] == "INFO"
    assert first["logger"] == "hypa.test" and first["ts"].endswith("Z")
    assert first["platform"] == "slack" and first["latency_ms"] == 42.5
    assert second["message"] == "multi\nline message"


def test_secrets_are_redacted_everywhere(capture):
    stream = capture(_settings())
    log = logging.getLogger("hypa.test")
    log.info("POST https://api.telegram.org/bot%s/sendMessage", TELEGRAM_TOKEN)
    log.info(
        "slack token %s, signing %s", SLACK_TOKEN, SIGNING_SECRET, extra={"headers": {"Authorization": f"Bearer {WEAVIATE_KEY}"}}
    )
    log.info("db at postgresql://hypa:s3cret-pw@db:5432/hypa")
    try:
        raise RuntimeError(f"auth failed for {SLACK_TOKEN}")
    except RuntimeError:
        log.exception("call failed")
    output = stream.getvalue()
    for secret in (TELEGRAM_TOKEN, SLACK_TOKEN, SIGNING_SECRET, WEAVIATE_KEY, "s3cret-pw"):
        assert secret not in output
    lines = _lines(stream)
    assert lines[0]["message"] == f"POST https://api.telegram.org/bot{REDACTED}/sendMessage"
    assert lines[1]["headers"]["Authorization"] == f"Bearer {REDACTED}"
    assert "RuntimeError" in lines[3]["exc"] and REDACTED in lines[3]["exc"]


def test_unknown_credentials_are_caught_by_shape():
    redact = Redactor()
    assert redact("key sk-ant-api03-abcdefghijkl here") == f"key {REDACTED} here"
    assert redact("xapp-1-A0123-456-abcdef") == REDACTED
    assert redact("https://user:pw123@host/db") == f"https://{REDACTED}@host/db"
    # A bot token that is not in the settings (another bot's) inside a Bot API URL.
    url = "https://api.telegram.org/bot987654321:AAGother_bots_token_0123456789abcdef/getUpdates"
    assert redact(url) == f"https://api.telegram.org/bot{REDACTED}/getUpdates"
    assert redact("nothing secret: 12:30, section 5-301") == "nothing secret: 12:30, section 5-301"


def test_secret_settings_found_by_name():
    values = secret_values(_settings(anthropic_api_key="sk-ant-xyz-123456"))
    assert {SLACK_TOKEN, TELEGRAM_TOKEN, SIGNING_SECRET, WEAVIATE_KEY, "s3cret-pw", "sk-ant-xyz-123456"} <= set(values)
    assert "ll144" not in values  # ordinary settings are not secrets


@pytest.mark.parametrize("enabled", [False, True])
def test_message_text_only_when_enabled(capture, enabled):
    stream = capture(_settings(log_message_text=enabled))
    logging.getLogger("hypa.test").info(
        "answered", extra={"question": "Do I need a bias audit?", "answer": "Yes [1].", "platform": "telegram"}
    )
    (line,) = _lines(stream)
    assert line["platform"] == "telegram"
    if enabled:
        assert line["question"] == "Do I need a bias audit?" and line["answer"] == "Yes [1]."
    else:
        assert "question" not in line and "answer" not in line
        assert "bias audit" not in stream.getvalue()


def test_text_format_is_scrubbed_too(capture):
    stream = capture(_settings(log_format="text"))
    logging.getLogger("hypa.test").info("token %s", SLACK_TOKEN, extra={"question": "secret question"})
    output = stream.getvalue()
    assert SLACK_TOKEN not in output and REDACTED in output and "secret question" not in output
    assert not output.startswith("{")


def test_configure_twice_keeps_one_handler(capture):
    capture(_settings())
    stream = capture(_settings())
    logging.getLogger("hypa.test").info("once")
    assert len(_lines(stream)) == 1
    assert sum(1 for h in logging.getLogger().handlers if getattr(h, "_hypa_handler", False)) == 1


QUESTION_TEXT = "Must the acme hiring tool be audited before 2027?"
PROVISION_TEXT = "An employer shall notify each candidate ten business days before use."


def _talk_through_the_real_clients() -> None:
    """One Messages API call with the anthropic SDK, one sendMessage with python-telegram-bot and one
    chat.postMessage with slack_sdk, each against its local fake, carrying the texts."""
    import asyncio

    import anthropic
    from slack_sdk import WebClient
    from telegram import Bot

    from hypa_testkit.fakes.anthropic_server import FakeAnthropic, message, reply
    from hypa_testkit.fakes.slack_server import FakeSlack
    from hypa_testkit.fakes.telegram_server import FakeTelegram

    with FakeAnthropic(default=reply(message("Yes."))) as fake:
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
        client.messages.create(
            model="claude-test", max_tokens=64,
            messages=[{"role": "user", "content": f"{QUESTION_TEXT}\n\n{PROVISION_TEXT}"}],
        )

    async def send(fake: FakeTelegram) -> None:
        async with Bot(fake.token, base_url=fake.base_url) as bot:
            await bot.send_message(chat_id=4242, text=PROVISION_TEXT)

    with FakeTelegram() as fake:
        asyncio.run(send(fake))

    with FakeSlack() as fake:
        WebClient(token="xoxb-1111-2222-abcdefABCDEF", base_url=fake.base_url).chat_postMessage(
            channel="C0CHANNEL", text=QUESTION_TEXT
        )


@pytest.mark.parametrize("enabled", [False, True])
def test_debug_level_keeps_message_text_out_of_library_logs_unless_enabled(capture, enabled):
    """HYPA_LOG_LEVEL=DEBUG: the anthropic SDK logs its request options and PTB the sendMessage
    parameters at DEBUG; with HYPA_LOG_MESSAGE_TEXT off no question or provision text may appear."""
    stream = capture(_settings(log_level="DEBUG", log_message_text=enabled))
    logging.getLogger("core.test").debug("our own debug line stays")
    _talk_through_the_real_clients()
    output = stream.getvalue()
    loggers = {line["logger"] for line in _lines(stream)}
    assert "core.test" in loggers
    if enabled:  # the libraries do log the text: the test would see it
        assert QUESTION_TEXT in output and PROVISION_TEXT in output
        assert {"anthropic._base_client", "telegram.Bot", "slack_sdk.web.base_client"} <= loggers
    else:
        assert QUESTION_TEXT not in output and PROVISION_TEXT not in output
        assert "HYPA_LOG_MESSAGE_TEXT=true includes them" in output  # says why the library lines are missing
