"""Answers in progress, and how long the oldest has been running: what /readyz needs to see a stuck pipeline.

A process whose answering threads all hang (a graph file that never finishes loading, a lock that is
never released, a dependency that never replies) still serves /healthz and its readiness checks of
the index and the database; only the age of the answers in progress shows that nobody gets one.
`AnswerWatch.answering()` wraps each pipeline call (core.conversation_service); `bot.health` turns
"the oldest has run longer than HYPA_ANSWER_STALL_S" into `"answering": false`.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class AnswerWatch:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started: dict[int, float] = {}  # ticket -> when its answer started
        self._tickets = itertools.count()
        self._lock = threading.Lock()

    @contextmanager
    def answering(self) -> Iterator[None]:
        """The block computes one answer; it counts as in progress until it returns or raises."""
        ticket = next(self._tickets)
        with self._lock:
            self._started[ticket] = self._clock()
        try:
            yield
        finally:
            with self._lock:
                del self._started[ticket]

    def in_progress(self) -> int:
        with self._lock:
            return len(self._started)

    def oldest_seconds(self) -> float:
        """How long the oldest answer in progress has been running; 0.0 when none is."""
        with self._lock:
            first = min(self._started.values(), default=None)
        return 0.0 if first is None else max(0.0, self._clock() - first)

    def stalled(self, limit_s: float) -> bool:
        return self.oldest_seconds() > limit_s
