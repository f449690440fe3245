"""The PTB Application for the bot, and its start/stop in polling or webhook mode.

Both modes run inside the one HTTP listener's lifespan (bot.http_app): polling starts PTB's Updater;
webhook mode has no Updater — our Starlette route feeds updates to the application's queue (PTB's
"custom webhook" pattern) and `setWebhook` is called on start with the secret and the update types.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from telegram import Update
from telegram.ext import AIORateLimiter, Application

from adapters.telegram.handlers import TelegramHandlers
from adapters.telegram.polling import ObservedPollRequest, PollingHealth
from adapters.telegram.recording import ConfirmWhenRecorded

# message_reaction is delivered only when asked for explicitly (and callback_query for the buttons).
ALLOWED_UPDATES = [Update.MESSAGE, Update.CALLBACK_QUERY, Update.MESSAGE_REACTION]
DEFAULT_WEBHOOK_PATH = "/telegram/webhook"
# A 429 (flood control) is retried this many times after waiting its retry_after.
FLOOD_RETRIES = 3


@dataclass(frozen=True)
class TelegramConfig:
    token: str
    base_url: str = "https://api.telegram.org/bot"  # + token; PTB also accepts "…/bot{token}"
    webhook_url: str = ""  # set = webhook mode
    webhook_secret: str = ""
    poll_timeout_s: float = 10.0  # getUpdates long-poll duration
    review_chat: str = ""  # HYPA_TELEGRAM_REVIEW_CHAT: the reviewers' chat id ("" = no review chat)

    @property
    def webhook_mode(self) -> bool:
        return bool(self.webhook_url)

    @property
    def base_file_url(self) -> str:
        """Files live under /file/bot<token> next to /bot<token> (same for a local Bot API server)."""
        head, sep, tail = self.base_url.rpartition("/bot")
        return f"{head}/file/bot{tail}" if sep else self.base_url

    @property
    def webhook_path(self) -> str:
        """The local route: the webhook URL's path (a proxy may forward it unchanged)."""
        path = urlsplit(self.webhook_url).path if self.webhook_url else ""
        return path if path and path != "/" else DEFAULT_WEBHOOK_PATH


def build_application(
    config: TelegramConfig, handlers: TelegramHandlers, polling: PollingHealth | None = None
) -> Application:
    """`polling`: told about each getUpdates (adapters/telegram/polling.py); give the same one to
    telegram_lifespan, which makes it the polling's error callback."""
    builder = (
        Application.builder()
        .token(config.token)
        .base_url(config.base_url)
        .base_file_url(config.base_file_url)
        .rate_limiter(AIORateLimiter(max_retries=FLOOD_RETRIES))
        # Updates run concurrently: answering one chat never waits for another chat's answer.
        .concurrent_updates(True)
    )
    if config.webhook_mode:
        builder = builder.updater(None)
    elif polling is not None:
        builder = builder.get_updates_request(ObservedPollRequest(polling))
    application = builder.build()
    handlers.register(application)
    if application.updater is not None:
        # Polling confirms a batch (the next getUpdates offset) only once its updates are recorded.
        application.updater.bot = ConfirmWhenRecorded(application.bot, handlers.recorder)  # type: ignore[assignment]
    return application


def telegram_lifespan(
    application: Application,
    config: TelegramConfig,
    handlers: TelegramHandlers | None = None,
    polling: PollingHealth | None = None,
) -> Callable:
    """A Starlette lifespan: initialize (getMe), start handling and the lease keeper (its recovery pass
    finishes replies a crashed process owed), then poll or register the webhook. On shutdown, stop
    taking updates, let answers in flight finish, then stop renewing leases.
    A failed poll is one log line through `polling` (PTB's own callback logs a traceback each time)."""

    @asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        async with application:  # initialize() ... shutdown()
            await application.start()
            leases = handlers.lease_keeper(application) if handlers is not None else None
            if leases is not None:
                leases.start()
            try:
                if config.webhook_mode:
                    await application.bot.set_webhook(
                        url=config.webhook_url, secret_token=config.webhook_secret, allowed_updates=ALLOWED_UPDATES
                    )
                else:
                    assert application.updater is not None
                    await application.updater.start_polling(
                        allowed_updates=ALLOWED_UPDATES, timeout=timedelta(seconds=config.poll_timeout_s),
                        error_callback=polling.failed if polling is not None else None,
                    )
                yield
            finally:
                if application.updater is not None and application.updater.running:
                    await application.updater.stop()
                if leases is not None:
                    leases.stop_recovering()
                await application.stop()  # waits for the updates being handled
                if leases is not None:
                    await leases.close()

    return lifespan


def telegram_ready(application: Application) -> bool:
    polling_ok = application.updater is None or application.updater.running
    return application.running and polling_ok
