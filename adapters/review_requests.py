"""Opening a person's review of an answer, the same on every platform (the review desks in
adapters/slack/review.py and adapters/telegram/review.py then post it in their own way)."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from core.conversation import ConversationService
from core.review import Exchange, RequestKind

if TYPE_CHECKING:
    from core.metrics import Metrics

log = logging.getLogger(__name__)


async def open_review(
    service: ConversationService,
    metrics: Metrics | None,
    platform: str,
    answer_id: str,
    requester: str,
    kind: RequestKind,
    exchange: Exchange | None = None,
) -> Exchange | None:
    """Open the review of an answer (or count one more request on it) and return the exchange to post
    for reviewers (`exchange` when the caller has it); None when there is nothing to post: an unknown
    answer, or a store that failed (logged and counted as a `<platform>_review` error)."""
    try:
        await asyncio.to_thread(service.request_review, answer_id, requester, kind)
        exchange = exchange or await asyncio.to_thread(service.exchange, answer_id)
    except Exception:
        log.exception("requesting a review of answer %s failed", answer_id)
        if metrics is not None:
            metrics.count_error(f"{platform}_review")
        return None
    if exchange is not None and metrics is not None:
        metrics.count_review(platform, f"requested_{kind}")
    return exchange
