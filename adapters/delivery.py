"""Replying to a chat message at least once, with an idempotent effect, on both platforms.

A question is claimed as a lease in the conversation store (`ConversationService.claim`) before
anything is posted. The holder posts a "Looking that up…" placeholder (remembered in the store),
computes or fetches the stored answer, shows it, and only then completes the lease. If the process
dies on the way, nothing renews its leases: after `lease_s` a redelivery of the message, or the
`LeaseKeeper` recovery sweep of any live process, takes the lease over and runs `finish_delivery`
again — which edits the placeholder the dead process posted (or posts in the thread) with the answer
it stored, or computes it. Any exception on the way turns the placeholder into a short apology.

When the answer window closed before Claude answered (HYPA_CHAT_ANSWER_WAIT_S), the reply shown is
the quoted, cited answer and `Reply.followup` brings Claude's: the lease completes once the quoted
answer is visible, and `show_followup` then puts Claude's answer in its place (`replace_shown`) as
work of its own, outside the answer slots. Completing first is deliberate: the person already has a
complete answer, a process that dies while Claude is still thinking takes Claude's call with it (a
takeover could only show the same stored answer again), and a lease held for the LLM's whole time
budget would widen the window in which a crash makes a takeover show a reply a second time. If the
process dies in between, the quoted answer simply stays.

Small bookkeeping replies (help texts) use `is_first_delivery` instead: at most once.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from core.conversation import ConversationService, Delivery, IncomingMessage, Reply

if TYPE_CHECKING:
    from core.metrics import Metrics

log = logging.getLogger(__name__)

# Answers computed at once per process. The pipeline is CPU-bound and holds the GIL most of the time,
# so more threads add no throughput; they only starve the event loop that must acknowledge Slack
# within 3 s and keep Telegram's updates and /readyz flowing (bench/bench_slack_ack.py).
MAX_CONCURRENT_ANSWERS = 2
# Lapsed leases one sweep takes over (the rest wait for the next sweep, or another replica).
RECOVERY_BATCH = 20
T = TypeVar("T")

# Lease bookkeeping (claims, placeholder ids, completions, renewals) runs on threads of its own, never
# queued behind answers and other slow work in the default executor: claims are on Slack's ack path, a
# renewal that waits too long lets a live lease lapse, and the time between a placeholder appearing
# and its id being stored is the window in which a crash leaves a placeholder Telegram offers no way
# to find again. Each call is a small transaction (well under a millisecond on SQLite).
_BOOKKEEPING = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hypa-leases")


async def bookkeeping(fn: Callable[..., T], *args: Any) -> T:
    """Run a short blocking store call on the bookkeeping threads."""
    return await asyncio.get_running_loop().run_in_executor(_BOOKKEEPING, functools.partial(fn, *args))


@dataclass(frozen=True)
class Shown:
    """Where a reply is visible: the platform ids of the messages showing it, in order (the first one
    in the placeholder's place). What Claude's late answer is shown in place of."""

    message_ids: tuple[str, ...]


class ReplySurface(Protocol):
    """How one platform shows a reply to a claimed message. Each method reports failure by its
    result (None / False) and raises only for a bug."""

    async def post_placeholder(self, delivery: Delivery) -> str | None:
        """Post "Looking that up…" in the message's thread; its platform id, or None."""

    async def find_placeholder(self, delivery: Delivery) -> str | None:
        """After a takeover with no placeholder stored: the one the dead worker may have posted
        before it could store its id, or None (or when the platform cannot look it up)."""

    async def discard(self, delivery: Delivery, placeholder: str) -> None:
        """Delete a placeholder that turned out to be a second one."""

    async def show(self, delivery: Delivery, placeholder: str, reply: Reply) -> Shown | None:
        """Show the reply: edit the placeholder ("" = none) or post in the thread. Where it is
        visible, or None when it could not be shown."""

    async def replace_shown(self, delivery: Delivery, shown: Shown, reply: Reply) -> None:
        """Show `reply` (Claude's answer, arriving late) in place of the reply `shown` displays. Raises
        when it could not (the caller logs it: the first reply stays, a complete answer)."""

    async def apologise(self, delivery: Delivery, placeholder: str) -> bool:
        """Replace the placeholder (or post in the thread) with a short apology. True once visible."""


async def claim(service: ConversationService, message: IncomingMessage) -> Delivery | None:
    """The lease on replying to `message`, or None for a duplicate delivery (the service counts and
    logs it). Raises when the store cannot record the message: the caller apologises instead."""
    return await bookkeeping(service.claim, message)


async def finish_delivery(
    service: ConversationService,
    surface: ReplySurface,
    delivery: Delivery,
    slots: asyncio.Semaphore,
    *,
    platform: str,
    metrics: Metrics | None = None,
    later: Callable[[Coroutine[Any, Any, None]], object] | None = None,
) -> bool:
    """Placeholder -> answer (at most `slots` at once) -> show -> complete the lease. True when the
    reply (or an apology) is visible; False leaves the lease to lapse, so the recovery sweep retries.

    A reply with a `followup` (Claude's answer still to come) is then shown in its place by
    `show_followup`, handed to `later` (e.g. a tracked task) or, without one, awaited here."""
    placeholder = delivery.placeholder
    reply: Reply | None = None
    where: Shown | None = None
    try:
        if not placeholder and delivery.attempt > 1:
            found = await surface.find_placeholder(delivery)
            if found:
                placeholder = await bookkeeping(service.note_placeholder, delivery, found)
        if not placeholder and not delivery.answered:
            posted = await surface.post_placeholder(delivery)
            if posted:
                placeholder = await bookkeeping(service.note_placeholder, delivery, posted)
                if placeholder != posted:  # an earlier attempt's placeholder was stored first
                    await surface.discard(delivery, posted)
        async with slots:
            reply = await asyncio.to_thread(service.answer, delivery)
        where = await surface.show(delivery, placeholder, reply)
        shown = where is not None
    except Exception:  # of any kind: the person gets an apology, never a placeholder left hanging
        log.exception("answering %s message %s failed", platform, delivery.message.message_id)
        if metrics is not None:
            metrics.count_error(f"{platform}_answer")
        try:
            shown = await surface.apologise(delivery, placeholder)
        except Exception:
            log.exception("could not tell %s message %s about the failure", platform, delivery.message.message_id)
            shown = False
    await _settle(service, delivery, shown, platform, metrics)
    if where is not None and reply is not None and reply.followup is not None:
        follow = show_followup(surface, delivery, where, reply.followup, platform=platform, metrics=metrics)
        if later is None:
            await follow
        else:
            later(follow)
    return shown


async def show_followup(
    surface: ReplySurface,
    delivery: Delivery,
    shown: Shown,
    followup: Future,
    *,
    platform: str,
    metrics: Metrics | None = None,
) -> None:
    """Wait for Claude's answer (`Reply.followup`, stored under the same answer id by the service) and
    show it in place of the quoted one. Any failure leaves the quoted answer, which is complete."""
    message_id = delivery.message.message_id
    try:
        final = await asyncio.wrap_future(followup)
    except Exception:
        log.exception("the late answer for %s message %s could not be stored", platform, message_id)
        if metrics is not None:
            metrics.count_error(f"{platform}_answer")
        return
    try:
        await surface.replace_shown(delivery, shown, final)
    except Exception:
        log.warning("showing Claude's answer to %s message %s failed", platform, message_id, exc_info=True)
        if metrics is not None:
            metrics.count_error(f"{platform}_answer")


async def _settle(
    service: ConversationService, delivery: Delivery, shown: bool, platform: str, metrics: Metrics | None
) -> None:
    if not shown:
        log.error(
            "nothing could be shown for %s message %s; the recovery sweep retries after the lease lapses",
            platform, delivery.message.message_id,
        )
        service.release(delivery)
        return
    try:
        await bookkeeping(service.complete, delivery)
    except Exception:  # the reply is visible; a later sweep shows the same stored reply again (an edit)
        log.exception("completing the lease on %s message %s failed", platform, delivery.message.message_id)
        if metrics is not None:
            metrics.count_error(f"{platform}_claim")
        service.release(delivery)


class LeaseKeeper:
    """Per process: renews the leases it holds, and finishes messages whose lease lapsed.

    `start()` runs a recovery pass at once (messages a crashed process claimed and never answered),
    then renews and sweeps every third of the lease (a sweep is one indexed query), so a reply owed
    by a process that died is resumed within about 1.3 leases by whichever process is alive.
    """

    def __init__(
        self,
        service: ConversationService,
        platform: str,
        finish: Callable[[Delivery], Awaitable[object]],
        *,
        metrics: Metrics | None = None,
        batch: int = RECOVERY_BATCH,
    ) -> None:
        self.service = service
        self.platform = platform
        self.finish = finish
        self.metrics = metrics
        self.batch = batch
        self._loop_task: asyncio.Task | None = None
        self._finishing: set[asyncio.Task] = set()
        self._recovering = False

    def start(self) -> None:
        self._recovering = True
        self._loop_task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.platform}-leases")

    def stop_recovering(self) -> None:
        """No new takeovers (shutting down); leases in hand are still renewed until `close()`."""
        self._recovering = False

    async def close(self, timeout_s: float = 30.0) -> None:
        """Wait (up to `timeout_s`) for recovered replies in flight, then stop renewing."""
        self._recovering = False
        if self._finishing:
            await asyncio.wait(set(self._finishing), timeout=timeout_s)
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task

    async def _run(self) -> None:
        tick = max(self.service.lease_s, 0.3) / 3
        while True:
            if self._recovering:  # the first pass at once, then every third of the lease
                await self._sweep()
            await asyncio.sleep(tick)
            await self._renew()

    async def _renew(self) -> None:
        try:
            await bookkeeping(self.service.renew_leases)
        except Exception:  # the next renewal may succeed well within the lease
            log.exception("renewing %s answer leases failed", self.platform)
            self._count_error()

    async def _sweep(self) -> None:
        room = self.batch - len(self._finishing)
        if room <= 0:
            return
        try:
            owed = await bookkeeping(self.service.reclaim, self.platform, room)
        except Exception:
            log.exception("the %s recovery sweep failed", self.platform)
            self._count_error()
            return
        for delivery in owed:
            task = asyncio.get_running_loop().create_task(
                self._finish_one(delivery), name=f"{self.platform}-recover-{delivery.message_pk}"
            )
            self._finishing.add(task)
            task.add_done_callback(self._finishing.discard)

    async def _finish_one(self, delivery: Delivery) -> None:
        try:
            await self.finish(delivery)
        except Exception:  # finish_delivery catches everything; this is a last line for bugs
            log.exception("recovering %s message %s failed", self.platform, delivery.message.message_id)
            self.service.release(delivery)
            self._count_error()

    def _count_error(self) -> None:
        if self.metrics is not None:
            self.metrics.count_error(f"{self.platform}_recovery")


async def is_first_delivery(
    service: ConversationService, platform: str, delivery_id: str, metrics: Metrics | None = None
) -> bool:
    """True unless the delivery was already claimed (that is logged and counted as a duplicate). At
    most once: only for small replies (help texts) that are better lost in a crash than doubled.

    Fails open: if the claim cannot be stored, the delivery is handled anyway, so a database hiccup
    never turns into a silent non-answer. The claim runs in a worker thread: the store does blocking
    I/O and the event loop must stay free.
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
