"""Claiming a platform delivery (a Slack event id, a Telegram update id) before handling it.

Both chat adapters drop a delivery they have seen before (platforms redeliver on timeouts, and
several replicas may receive one event) by claiming its id in the conversation store first.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from core.conversation import ConversationService

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)

# Answers computed at once per process. The pipeline is CPU-bound and holds the GIL most of the time,
# so more threads add no throughput; they only starve the event loop that must acknowledge Slack
# within 3 s and keep Telegram's updates and /readyz flowing (bench/bench_slack_ack.py).
MAX_CONCURRENT_ANSWERS = 2


async def is_first_delivery(
    service: ConversationService, platform: str, delivery_id: str, metrics: Metrics | None = None
) -> bool:
    """True unless the delivery was already claimed (that is logged and counted as a duplicate).

    Fails open: if the claim cannot be stored, the delivery is handled anyway (the service still
    refuses to answer one message twice), so a database hiccup never turns into a silent non-answer.
    The claim runs in a worker thread: the store does blocking I/O and the event loop must stay free.
    """
    try:
        first = await asyncio.to_thread(service.claim_delivery, platform, delivery_id)
    except Exception:
        log.exception("claiming %s delivery %s failed; handling it anyway", platform, delivery_id)
        if metrics is not None:
            metrics.count_error(f"{platform}_claim")
        return True
    if not first:
        log.info("%s delivery %s already handled; dropped", platform, delivery_id)
        if metrics is not None:
            metrics.count_duplicate(platform)
    return first
