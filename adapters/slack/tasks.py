"""Background work started after Slack has been acknowledged, tracked so it can be awaited.

asyncio keeps only weak references to tasks, so un-referenced work can vanish mid-flight; this
holds them, logs their failures, and lets shutdown (and tests) wait until every answer is sent.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine

log = logging.getLogger(__name__)


class BackgroundTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def spawn(self, work: Coroutine, name: str = "") -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(work, name=name or None)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("slack background task %s failed", task.get_name(), exc_info=task.exception())

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until no work is pending (new work started meanwhile included); False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._tasks:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.wait(set(self._tasks), timeout=remaining)
        return True
