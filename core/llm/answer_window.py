"""How long a person in chat waits for Claude: the answer window of one question.

A chat adapter (through the conversation service) opens a window with a deadline, e.g. 8 s after the
message arrived, and runs the answer pipeline inside it. The LLM stages consult the window:

* the rewriter gives up on Claude at the deadline and rewrites offline;
* the answer generator, when Claude has not answered by the deadline, returns the extractive, cited
  answer at once and leaves Claude's call running: its eventual answer is put in `window.late`, for
  the service to store and the adapter to show in place of the first one (Slack chat.update,
  Telegram editMessageText).

Outside a window (`hypa ask`, evaluation) nothing changes: the stages wait for Claude up to the
client's own time budget. The window travels in a context variable, so the pipeline between the
service and the LLM stages (retrieval, ranking) needs no parameter for it; asyncio.to_thread copies
the context into the worker thread that runs the service.
"""
from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

_window: contextvars.ContextVar[AnswerWindow | None] = contextvars.ContextVar("hypa_answer_window", default=None)

# LLM calls that outlive a window run here. Sized for a burst of questions against a hung endpoint:
# each call holds a thread for at most the client's time budget, and once the circuit opens new calls
# fail at once. Beyond this, late calls queue (their questions already have an answer shown).
LATE_CALL_THREADS = 16
_late_calls = ThreadPoolExecutor(max_workers=LATE_CALL_THREADS, thread_name_prefix="hypa-late-llm")


@dataclass
class AnswerWindow:
    deadline: float  # time.monotonic() after which the person should see an answer
    wait_s: float  # the length of the window, for messages ("has not answered within 8 s")
    # Set by the answer generator when it answered before Claude did: resolves to the final Answer
    # (Claude's, or the fallback's with a note when Claude failed). Never raises.
    late: Future | None = field(default=None)

    def remaining(self, clock: Callable[[], float] = time.monotonic) -> float:
        return max(0.0, self.deadline - clock())


def current_window() -> AnswerWindow | None:
    return _window.get()


@contextlib.contextmanager
def answer_window(wait_s: float, *, started: float | None = None) -> Iterator[AnswerWindow]:
    """Run the pipeline inside a window of `wait_s` seconds from `started` (time.monotonic(); default now)."""
    window = AnswerWindow(deadline=(time.monotonic() if started is None else started) + wait_s, wait_s=wait_s)
    token = _window.set(window)
    try:
        yield window
    finally:
        _window.reset(token)


def run_late(fn: Callable[..., T], *args: Any) -> Future:
    """Start `fn(*args)` on the late-call pool, outside any window (so it waits for Claude in full)."""
    return _late_calls.submit(contextvars.Context().run, fn, *args)
