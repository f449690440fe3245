"""A hung LLM endpoint no longer holds a person in chat for a minute (issue 13, item 9).

The real anthropic SDK against hypa_testkit/fakes/anthropic_server.py; `never_answers()` accepts the request
and never replies. Inside a chat's answer window the generator answers with the quoted answer at the
deadline, counts the wait towards the circuit breaker, and hands Claude's later answer to the service,
which stores it under the same answer id and gives the adapter a follow-up to show it.
"""
from __future__ import annotations

import threading
import time

from core.conversation import IncomingMessage
from core.llm.answer_window import answer_window
from core.llm.claude_generator import ClaudeGenerator
from core.llm.client import CircuitBreaker, FallbackGenerator, RetryPolicy
from core.llm.rewriter import LLMRewriter
from core.types import Turn
from hypa_testkit.fakes.anthropic_client import make_client
from hypa_testkit.fakes.anthropic_server import cites_first_document, held, message, never_answers, reply
from hypa_testkit.toy import scored, toy_generator, toy_service
from tests.test_claude_generator import QUESTION, cited_answer

HUNG_BUDGET = dict(timeout_s=30.0, total_budget_s=60.0, retry=RetryPolicy(max_retries=2, base_delay_s=0.01))


def generator_for(fake, **client) -> FallbackGenerator:
    claude = ClaudeGenerator(make_client(fake, **{**HUNG_BUDGET, **client}))
    return FallbackGenerator(claude, toy_generator(), breaker=claude.client.breaker)


def test_outside_a_window_a_hung_endpoint_still_holds_the_caller_for_the_clients_budget(fake):
    """What `hypa ask` does (and every chat did): the timeout, not a person's patience, ends the wait."""
    fake.default = never_answers()
    generator = generator_for(fake, timeout_s=0.6, total_budget_s=1.0, retry=RetryPolicy(max_retries=0))
    t0 = time.monotonic()
    answer = generator.generate(QUESTION, scored())
    assert time.monotonic() - t0 >= 0.6 and "Claude was unavailable (timed out)" in answer.note


def test_in_a_window_the_quoted_answer_comes_at_the_deadline_and_claudes_replaces_it(fake):
    gate = threading.Event()
    fake.enqueue(held(cited_answer(), gate))
    generator = generator_for(fake)
    t0 = time.monotonic()
    with answer_window(0.5) as window:
        first = generator.generate(QUESTION, scored())
    waited = time.monotonic() - t0
    assert 0.45 <= waited < 2.0  # not the 30 s timeout
    assert first.model == "extractive" and "ten business days" in first.text and first.citations
    assert "has not answered within 0.5 s" in first.note and "replaced by Claude's" in first.note
    assert window.late is not None and not window.late.done()
    gate.set()
    final = window.late.result(timeout=10)
    assert final.model == "claude-sonnet-5-5" and final.note == "" and final.citations


def test_a_fast_answer_inside_the_window_is_simply_the_answer(fake):
    fake.enqueue(cited_answer())
    with answer_window(5.0) as window:
        answer = generator_for(fake).generate(QUESTION, scored())
    assert answer.model == "claude-sonnet-5-5" and window.late is None


def test_every_wait_given_up_counts_towards_the_breaker_so_the_third_asker_waits_not_at_all(fake):
    fake.default = never_answers()
    generator = generator_for(fake, circuit_failure_threshold=2)
    waits = []
    for _ in range(3):
        t0 = time.monotonic()
        with answer_window(0.3):
            answer = generator.generate(QUESTION, scored())
        waits.append(time.monotonic() - t0)
    assert generator.breaker.state == CircuitBreaker.OPEN
    assert waits[0] >= 0.29 and waits[1] >= 0.29
    assert waits[2] < 0.2  # the circuit is open: the quoted answer at once, nothing left pending
    assert "paused after repeated failures" in answer.note
    assert len(fake.message_requests) == 2


def test_when_claude_fails_late_the_final_answer_says_why(fake):
    fake.default = never_answers()
    generator = generator_for(fake, timeout_s=0.8, total_budget_s=0.8, retry=RetryPolicy(max_retries=0))
    with answer_window(0.2) as window:
        first = generator.generate(QUESTION, scored())
    final = window.late.result(timeout=10)
    assert final.text == first.text and final.model == "extractive"
    assert "Claude was unavailable (timed out)" in final.note


def test_the_rewriter_gives_up_at_the_deadline_and_rewrites_offline(fake):
    fake.default = never_answers()
    rewriter = LLMRewriter(make_client(fake, **HUNG_BUDGET))
    history = [Turn("user", "What is a widget audit?"), Turn("assistant", "A review of widgets.")]
    t0 = time.monotonic()
    with answer_window(0.4):
        rewrite = rewriter.rewrite("and who performs it?", history, 0)
    assert time.monotonic() - t0 < 2.0
    assert rewrite.model != rewriter.config.model and rewriter.fallbacks == 1  # the offline rewrite
    assert rewriter.client.breaker._failures == 1


# --- the service: store, reply, follow-up -----------------------------------------------------------


def incoming(text: str, message_id: str, **kw) -> IncomingMessage:
    fields = dict(platform="slack", workspace="T1", channel="C1", thread="100.1", user="U1", text=text,
                  message_id=message_id)
    fields.update(kw)
    return IncomingMessage(**fields)


def test_the_service_shows_the_quoted_answer_then_stores_claudes_under_the_same_id(fake, tmp_path):
    gate = threading.Event()
    fake.enqueue(lambda request: held(cites_first_document(request), gate))
    service = toy_service(tmp_path, generator=generator_for(fake))
    service.answer_wait_s = 0.5
    t0 = time.monotonic()
    first = service.handle(incoming(QUESTION, "100.1"))
    assert time.monotonic() - t0 < 3.0
    assert first.followup is not None and "has not answered within 0.5 s" in first.note
    assert service.store.get_answer(first.answer_id).record.model == "extractive"
    gate.set()
    final = first.followup.result(timeout=10)
    assert final.answer_id == first.answer_id and final.note == "" and final.citations
    stored = service.store.get_answer(first.answer_id).record
    assert stored.model == "claude-sonnet-5-5" and stored.text == final.text and stored.tokens_in == 100
    # The thread's history (what a follow-up question is rewritten with) is Claude's answer now.
    history = service.store.history_for_thread("slack", "T1", "C1", "100.1", 6)
    assert history[-1].content == final.text


def test_the_window_counts_from_when_the_message_arrived(fake, tmp_path):
    """A message that waited for a free answer slot has used up part of its window already."""
    fake.default = never_answers()
    service = toy_service(tmp_path, generator=generator_for(fake))
    service.answer_wait_s = 1.0
    arrived_earlier = incoming(QUESTION, "100.2", received_at=time.monotonic() - 5.0)
    t0 = time.monotonic()
    reply_ = service.handle(arrived_earlier)
    assert time.monotonic() - t0 < 0.8 and reply_.followup is not None


def test_without_a_wait_setting_the_service_waits_for_the_generator(fake, tmp_path):
    fake.enqueue(reply(message("x"), delay_s=0.6))  # uncited: falls back, after the delay
    service = toy_service(tmp_path, generator=generator_for(fake, retry=RetryPolicy(max_retries=0)))
    assert service.answer_wait_s is None
    t0 = time.monotonic()
    answered = service.handle(incoming(QUESTION, "100.3"))
    assert time.monotonic() - t0 >= 0.6 and answered.followup is None


def test_hypa_chat_shows_the_quoted_answer_then_claudes(monkeypatch):
    """The terminal chat prints the quoted answer, says it waits for Claude's, then prints it."""
    import io
    from concurrent.futures import Future

    from rich.console import Console

    from adapters.terminal import run_chat
    from core.conversation import Reply

    later: Future = Future()
    quoted = Reply("a1", "Quoted: a seller shall notify each buyer.", [], False,
                   note="Claude has not answered within 8 s; ...", followup=later)

    class Service:
        def handle(self, message):
            threading.Timer(0.2, later.set_result, [Reply("a1", "Claude: ten business days.", [], False)]).start()
            return quoted

    lines = iter(["How many days?", "/quit"])
    monkeypatch.setattr("builtins.input", lambda *a: next(lines))
    console = Console(file=io.StringIO(), width=200, record=True)
    run_chat(console, Service(), user="me")
    shown = console.export_text()
    assert (
        shown.index("Quoted: a seller") < shown.index("waiting for Claude's answer") < shown.index("Claude: ten business days.")
    )
