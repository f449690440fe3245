"""Polling that fails, logged like an operator wants it: one line, fewer the longer it lasts, one when it recovers.

python-telegram-bot retries a failed getUpdates with a back-off (telegram/ext/_utils/networkloop.py:
1 s after the first failure, x1.5 after each further one, at most 30 s; a timeout is retried at once
and a success resets it), but its default error callback logs the whole traceback of every failure:
with the Bot API unreachable, a traceback every few seconds, forever. `PollingHealth.failed` is the
error callback instead: one WARNING line naming the error, how many polls failed in a row and when
the next comes, logged for the 1st, 2nd, 4th, 8th, ... failure in a row. `ObservedPollRequest`, the
transport of getUpdates, tells it when a poll is answered again (one INFO line) or timed out.
"""
from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from telegram.error import TelegramError, TimedOut
from telegram.request import HTTPXRequest

log = logging.getLogger(__name__)

# python-telegram-bot's network_retry_loop, mirrored to say when the next poll comes.
BACKOFF_FIRST_S = 1.0
BACKOFF_FACTOR = 1.5
BACKOFF_MAX_S = 30.0


class PollingHealth:
    def __init__(self) -> None:
        self.failures = 0  # failed polls in a row
        self.next_delay_s = 0.0  # PTB's wait before the next poll

    def failed(self, error: TelegramError) -> None:
        """PTB's `error_callback` of start_polling: called for each failed getUpdates but timeouts."""
        self.failures += 1
        self.next_delay_s = BACKOFF_FIRST_S if self.next_delay_s == 0 else min(BACKOFF_MAX_S, self.next_delay_s * BACKOFF_FACTOR)
        if self.failures & (self.failures - 1) == 0:  # 1, 2, 4, 8, ...: a long outage stays a few lines
            log.warning(
                "Telegram getUpdates failed (%s: %s), %d time(s) in a row; retrying in %g s (back-off up to %g s)",
                type(error).__name__, error, self.failures, round(self.next_delay_s, 2), BACKOFF_MAX_S,
            )

    def timed_out(self) -> None:
        self.next_delay_s = 0.0  # PTB polls again at once after a timeout

    def answered(self) -> None:
        if self.failures:
            log.info("Telegram getUpdates answers again after %d failed poll(s)", self.failures)
        self.failures = 0
        self.next_delay_s = 0.0


class ObservedPollRequest(HTTPXRequest):
    """The transport PTB's builder would make for getUpdates (one connection, default timeouts), which
    also tells `PollingHealth` whether each poll got an answer."""

    def __init__(self, health: PollingHealth) -> None:
        super().__init__(connection_pool_size=1)
        self.health = health

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        try:
            code, payload = await super().do_request(*args, **kwargs)
        except TimedOut:
            self.health.timed_out()
            raise
        if code == HTTPStatus.OK:
            self.health.answered()
        return code, payload
