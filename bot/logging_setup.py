"""Process logging for `hypa serve`: one JSON object per line (HYPA_LOG_FORMAT=json) or plain text.

Two promises, whatever the format:
  * **No secrets.** Every line is scrubbed of the values of secret settings (tokens, keys, signing
    secrets, the password inside HYPA_DATABASE_URL) and of anything shaped like a known credential
    (Slack `xox?-`/`xapp-` tokens, Anthropic `sk-ant-` keys, Telegram bot tokens `123456:ABC...`
    including inside Bot API URLs, `Bearer ...` headers, `user:password@` in URLs). Tracebacks too.
  * **No message text unless HYPA_LOG_MESSAGE_TEXT=true.** Code that wants to log what a user asked
    or what the bot answered passes it as a structured field, never inside the message string:
    `log.info("answered", extra={"question": q, "answer": a})`. Fields named in TEXT_FIELDS are
    dropped from the output unless the setting is on. Other packages do not follow that rule: at
    DEBUG the Anthropic SDK logs each request's options (the question, the provisions),
    python-telegram-bot every update and every Bot API call's parameters, slack_sdk request and
    response bodies. So unless the setting is on, DEBUG records of loggers outside hypa's own
    packages (OWN_LOGGERS) are dropped; their INFO and above stay.

JSON lines: {"ts", "level", "logger", "message", ...extra fields, "exc" (traceback, if any)}.
"""
from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterable, Sequence
from typing import IO, Any
from urllib.parse import urlsplit

REDACTED = "[REDACTED]"
TEXT_FIELDS = frozenset({"text", "question", "answer", "message_text", "reply_text", "quote", "history"})
_SECRET_SETTING = re.compile(r"(token|secret|api_key|password|credential)", re.IGNORECASE)
_CREDENTIAL_SHAPES = (
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}"),  # Slack bot/user tokens
    re.compile(r"\bxapp-[A-Za-z0-9-]{8,}"),  # Slack app-level (Socket Mode) tokens
    re.compile(r"\bsk-ant-[A-Za-z0-9_-]{8,}"),  # Anthropic API keys
    # Telegram bot tokens, alone or inside Bot API URLs (.../bot<token>/...: no word boundary after "bot").
    re.compile(r"(?:\b|(?<=bot))\d{6,12}:[A-Za-z0-9_-]{30,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),  # Authorization headers
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ in URLs
)
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
_HANDLER_MARK = "_hypa_handler"
# Top-level logger names of hypa's own code (`logging.getLogger(__name__)`), which logs text only
# in TEXT_FIELDS; every other logger belongs to a library.
OWN_LOGGERS = frozenset({"bot", "core", "storage", "adapters", "hypa", "__main__"})


class Redactor:
    """Replaces known secret values and credential-shaped strings with [REDACTED]."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret containing another secret is removed whole.
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        for shape in _CREDENTIAL_SHAPES:
            text = shape.sub(REDACTED, text)
        return text


def secret_values(settings: Any) -> list[str]:
    """Values of secret-looking settings (by field name), plus the password in the database URL."""
    values = []
    for name in type(settings).model_fields:
        value = getattr(settings, name, None)
        if isinstance(value, str) and value and _SECRET_SETTING.search(name):
            values.append(value)
    url = getattr(settings, "database_url", "") or ""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        values.append(password)
    return values


def _extra_fields(record: logging.LogRecord, log_message_text: bool) -> dict[str, Any]:
    return {
        key: value
        for key, value in record.__dict__.items()
        if key not in _STANDARD_ATTRIBUTES and not key.startswith("_")
        and (log_message_text or key not in TEXT_FIELDS)
    }


def _scrub(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {str(k): _scrub(v, redact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v, redact) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return redact(repr(value))


class JsonFormatter(logging.Formatter):
    def __init__(self, redact: Redactor, *, log_message_text: bool = False) -> None:
        super().__init__()
        self.redact = redact
        self.log_message_text = log_message_text

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": self.redact(record.getMessage()),
        }
        for key, value in _extra_fields(record, self.log_message_text).items():
            entry.setdefault(key, _scrub(value, self.redact))
        if record.exc_info:
            entry["exc"] = self.redact(self.formatException(record.exc_info))
        if record.stack_info:
            entry["stack"] = self.redact(self.formatStack(record.stack_info))
        return json.dumps(entry, ensure_ascii=False, default=str)


class RedactingTextFormatter(logging.Formatter):
    """The usual one-line text format, scrubbed (extra fields are not printed, so text stays out)."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.redact = redact

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(super().format(record))


class LibraryDebugFilter(logging.Filter):
    """Drops DEBUG records of libraries' loggers (see the module docstring: they carry message text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.INFO or record.name.split(".", 1)[0] in OWN_LOGGERS


def build_handler(settings: Any, stream: IO[str] | None = None) -> logging.Handler:
    redact = Redactor(secret_values(settings))
    handler = logging.StreamHandler(stream or sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter(redact, log_message_text=settings.log_message_text))
    else:
        handler.setFormatter(RedactingTextFormatter(redact))
    if not settings.log_message_text:
        handler.addFilter(LibraryDebugFilter())
    setattr(handler, _HANDLER_MARK, True)
    return handler


def configure_logging(
    settings: Any,
    stream: IO[str] | None = None,
    *,
    quiet: Sequence[str] = ("httpx", "httpcore", "grpc", "urllib3"),
) -> logging.Handler:
    """Install the handler on the root logger (replacing one installed before); returns it.

    Libraries in `quiet` log at WARNING and above only (their INFO lines are per-request noise,
    and httpx's carry request URLs, which for Telegram contain the bot token).
    """
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    handler = build_handler(settings, stream)
    root.addHandler(handler)
    root.setLevel(str(settings.log_level).upper())
    for name in quiet:
        logging.getLogger(name).setLevel(logging.WARNING)
    # Route uvicorn's records through ours (JSON, scrubbed). Call `uvicorn.run(..., log_config=None)`
    # afterwards, or uvicorn's dictConfig installs its own handlers again.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uv = logging.getLogger(name)
        uv.handlers = []
        uv.propagate = True
    if root.isEnabledFor(logging.DEBUG) and not settings.log_message_text:
        logging.getLogger(__name__).info(
            "HYPA_LOG_LEVEL=DEBUG: other libraries' debug lines are left out, as they carry message text; "
            "HYPA_LOG_MESSAGE_TEXT=true includes them"
        )
    return handler

