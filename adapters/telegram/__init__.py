"""Telegram bot (python-telegram-bot v22): application builder, handlers, HTML rendering, webhook route."""
from adapters.telegram.app import (
    ALLOWED_UPDATES,
    TelegramConfig,
    build_application,
    telegram_lifespan,
    telegram_ready,
)
from adapters.telegram.handlers import TelegramHandlers
from adapters.telegram.webhook import webhook_route

__all__ = [
    "ALLOWED_UPDATES",
    "TelegramConfig",
    "TelegramHandlers",
    "build_application",
    "telegram_lifespan",
    "telegram_ready",
    "webhook_route",
]
