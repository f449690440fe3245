"""Acknowledging a Telegram update only once the bot has recorded it.

Telegram forgets an update once it is acknowledged: with long polling, by the `offset` of the next
`getUpdates`; with a webhook, by the HTTP 200. PTB's Updater asks for the next batch (so confirms
the last one) as soon as it has queued it, and a webhook route that answers 200 after queueing does
the same: a process killed right then loses those updates for good. Here the acknowledgement waits
until the handlers have recorded every update of the batch — a question is recorded once it is
claimed with its lease (adapters/delivery.py), anything else once its handlers are done — so after a
crash, each acknowledged question is in the database and the recovery sweep answers it.

The wait is bounded (RECORD_TIMEOUT_S): a handler that never reports only delays the next poll.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from telegram import Bot

log = logging.getLogger(__name__)

RECORD_TIMEOUT_S = 10.0


class UpdateRecorder:
    """Update ids fetched or received but not yet recorded by the handlers."""

    def __init__(self, timeout_s: float = RECORD_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._pending: dict[int, asyncio.Event] = {}

    def expect(self, update_ids: Iterable[int]) -> None:
        for update_id in update_ids:
            self._pending.setdefault(update_id, asyncio.Event())

    def recorded(self, update_id: int) -> None:
        """Handlers call this once a crash could no longer lose the update."""
        event = self._pending.get(update_id)
        if event is not None:
            event.set()

    async def wait(self, update_ids: Iterable[int]) -> None:
        ids = [i for i in update_ids if i in self._pending]
        waits = [self._pending[i].wait() for i in ids]
        if waits:
            try:
                await asyncio.wait_for(asyncio.gather(*waits), self.timeout_s)
            except TimeoutError:
                late = [i for i in ids if not self._pending[i].is_set()]
                log.warning("telegram updates %s not recorded within %.0f s; acknowledging them anyway",
                            late, self.timeout_s)
        for i in ids:
            self._pending.pop(i, None)

    async def wait_below(self, offset: int) -> None:
        await self.wait([i for i in list(self._pending) if i < offset])

    @property
    def pending(self) -> int:
        return len(self._pending)


class ConfirmWhenRecorded:
    """The bot as PTB's Updater sees it: `getUpdates` with a new offset (which confirms everything
    below it to Telegram) waits until those updates are recorded. Everything else is the real bot."""

    def __init__(self, bot: Bot, recorder: UpdateRecorder) -> None:
        self._bot = bot
        self._recorder = recorder

    async def get_updates(self, offset: int | None = None, **kwargs: Any):  # noqa: ANN201
        if offset:
            await self._recorder.wait_below(offset)
        updates = await self._bot.get_updates(offset=offset, **kwargs)
        self._recorder.expect(u.update_id for u in updates)
        return updates

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bot, name)
