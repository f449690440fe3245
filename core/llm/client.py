"""Calling Claude without letting its failures reach the user.

* `ClaudeClient.create_message(**params)`: one Messages API call through the real `anthropic` SDK
  (its own retries are off: `max_retries=0`), with our bounded retry loop around it — exponential
  backoff with jitter on 408/409/429/5xx/529 and connection errors, honouring `retry-after(-ms)` and
  `x-should-retry`, a per-attempt timeout and a total time budget per call — and a circuit breaker
  checked before every attempt.
* `CircuitBreaker`: thread-safe; opens after N consecutive failed attempts, rejects calls at once
  while open, lets one probe through after a cool-down (half-open) and closes again on success.
* `FallbackGenerator(primary, fallback, recorder)`: a `core.pipeline.Generator` that returns the
  primary's answer, or on any failure the fallback's answer with a one-line note, after recording the
  failure with its question. No exception reaches the caller. Inside a chat's answer window
  (core/llm/answer_window.py) it waits for the primary only until the window's deadline: then it
  returns the fallback's answer at once, counts the wait as a failure towards the circuit breaker, and
  leaves the primary's call running; its answer (or, if it fails, the fallback's with the reason) is
  put in `window.late` for the chat to show instead.

Every failure is turned into an `LLMError` carrying a short human `reason` for the note.
"""
from __future__ import annotations

import dataclasses
import email.utils
import json
import logging
import random
import re
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import anthropic

from core.errors import (
    CircuitOpenError,
    LLMError,
    LLMRefusal,
    LLMRequestError,
    LLMUnavailable,
    MalformedResponseError,
    UngroundedAnswerError,
)
from core.llm.answer_window import current_window, run_late
from core.types import Answer, ScoredChunk, Turn, Usage

log = logging.getLogger(__name__)


# --- errors -----------------------------------------------------------------------------------


# --- retry policy -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2  # retries after the first attempt
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    # A server asking us to wait longer than this is treated as "down now": fail fast, fall back.
    max_retry_after_s: float = 20.0

    def backoff(self, retry_number: int, rng: Callable[[], float] = random.random) -> float:
        """Delay before retry `retry_number` (0-based): exponential, capped, with 50–100% jitter."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2.0**retry_number))
        return ceiling * (0.5 + 0.5 * rng())


def parse_retry_after(headers: Any, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date), or None."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, float(email.utils.mktime_tz(parsed)) - now())


# --- circuit breaker --------------------------------------------------------------------------


class CircuitBreaker:
    """closed → (threshold consecutive failures) → open → (reset_s elapsed) → half-open: one probe;
    its success closes the circuit, its failure re-opens it. Thread-safe; `clock` is injectable."""

    CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"

    def __init__(
        self, failure_threshold: int = 5, reset_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        self.failure_threshold = failure_threshold
        self.reset_s = reset_s
        self._clock = clock
        self._lock = threading.Lock()
        self._state = self.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probe_started: float | None = None
        self.times_opened = 0

    @property
    def state(self) -> str:
        with self._lock:
            if self._state == self.OPEN and self._clock() - self._opened_at >= self.reset_s:
                return self.HALF_OPEN
            return self._state

    def retry_in(self) -> float:
        """Seconds until the next probe is allowed (0 if calls are allowed now)."""
        with self._lock:
            if self._state != self.OPEN:
                return 0.0
            return max(0.0, self.reset_s - (self._clock() - self._opened_at))

    def allow(self) -> bool:
        with self._lock:
            now = self._clock()
            if self._state == self.CLOSED:
                return True
            if self._state == self.OPEN:
                if now - self._opened_at < self.reset_s:
                    return False
                self._state = self.HALF_OPEN
                self._probe_started = now
                return True
            # half-open: one probe at a time; a probe that never reported back is replaced after reset_s
            if self._probe_started is None or now - self._probe_started >= self.reset_s:
                self._probe_started = now
                return True
            return False

    def record_success(self) -> None:
        with self._lock:
            self._state = self.CLOSED
            self._failures = 0
            self._probe_started = None

    def record_failure(self) -> None:
        with self._lock:
            self._probe_started = None
            if self._state == self.HALF_OPEN:
                self._open()
                return
            self._failures += 1
            if self._state == self.CLOSED and self._failures >= self.failure_threshold:
                self._open()

    def _open(self) -> None:
        self._state = self.OPEN
        self._opened_at = self._clock()
        self._failures = 0
        self.times_opened += 1


# --- the client -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientConfig:
    api_key: str
    base_url: str | None = None  # None/"" = the SDK default (https://api.anthropic.com)
    timeout_s: float = 30.0  # per attempt
    total_budget_s: float = 60.0  # all attempts and waits of one call
    retry: RetryPolicy = RetryPolicy()
    circuit_failure_threshold: int = 5
    circuit_reset_s: float = 30.0


class ClaudeClient:
    """Thread-safe wrapper around `anthropic.Anthropic` for `messages.create`."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        breaker: CircuitBreaker | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
        sdk: anthropic.Anthropic | None = None,
    ) -> None:
        self.config = config
        self.breaker = breaker or CircuitBreaker(config.circuit_failure_threshold, config.circuit_reset_s, clock)
        self._sleep = sleep
        self._clock = clock
        self._rng = rng
        self._sdk = sdk or anthropic.Anthropic(
            api_key=config.api_key,
            base_url=config.base_url or None,
            timeout=config.timeout_s,
            max_retries=0,  # retries are ours (bounded, observable, circuit-aware)
        )
        self.attempts = 0  # total HTTP attempts made (for tests and diagnostics)
        self._attempts_lock = threading.Lock()

    def create_message(self, **params: Any) -> anthropic.types.Message:
        """`messages.create(**params)` with retries; raises an LLMError subclass on failure."""
        deadline = self._clock() + self.config.total_budget_s
        retry_number = 0
        while True:
            if not self.breaker.allow():
                raise CircuitOpenError(
                    f"circuit open; next probe in {self.breaker.retry_in():.1f}s", counts_as_outage=False
                )
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise LLMUnavailable("time budget exhausted", reason="timed out")
            with self._attempts_lock:
                self.attempts += 1
            try:
                message = self._sdk.messages.create(**params, timeout=min(self.config.timeout_s, remaining))
                check_message(message)
            except Exception as exc:  # noqa: BLE001 - every failure is classified below
                error = classify(exc)
                if error.counts_as_outage:
                    self.breaker.record_failure()
                else:
                    self.breaker.record_success()  # the API answered: it is up
                delay = None
                if error.retryable and retry_number < self.config.retry.max_retries:
                    delay = self._delay(error, retry_number)
                if delay is None or self._clock() + delay >= deadline:
                    if error is exc:
                        raise
                    raise error from exc
                log.info("Claude call failed (%s); retry %d in %.2fs", error.reason, retry_number + 1, delay)
                self._sleep(delay)
                retry_number += 1
                continue
            self.breaker.record_success()
            return message

    def _delay(self, error: LLMError, retry_number: int) -> float | None:
        if error.retry_after is not None:
            if error.retry_after > self.config.retry.max_retry_after_s:
                return None
            return error.retry_after
        return self.config.retry.backoff(retry_number, self._rng)


def check_message(message: Any) -> None:
    """Raise MalformedResponseError unless `message` looks like a Messages API `message` object."""
    if not isinstance(message, anthropic.types.Message):
        raise MalformedResponseError(f"expected a message object, got {type(message).__name__}")
    if getattr(message, "type", None) != "message" or not isinstance(getattr(message, "content", None), list):
        raise MalformedResponseError("response is not a message with a content list")
    if getattr(message, "usage", None) is None:
        raise MalformedResponseError("response has no usage")


# A reply wrapped in a Markdown code fence (```json ... ```), as models sometimes send JSON.
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def reply_text(message: Any) -> str:
    """The concatenated text blocks of a Messages API reply (other block types are skipped)."""
    return "".join(getattr(b, "text", "") or "" for b in message.content if getattr(b, "type", None) == "text")


def reply_json_object(text: str, what: str) -> dict[str, Any]:
    """The JSON object a model replied with; a code fence or text around the object is tolerated.
    MalformedResponseError (naming `what`, e.g. "rewrite") when there is no JSON object."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:
        # Tolerate text around the object: take the first '{' to the last '}'.
        start, end = body.find("{"), body.rfind("}")
        if start == -1 or end <= start:
            raise MalformedResponseError(f"{what} is not JSON ({len(body)} characters)", excerpt=body[:80]) from None
        try:
            data = json.loads(body[start : end + 1])
        except ValueError as exc:
            raise MalformedResponseError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise MalformedResponseError(f"{what} is a JSON {type(data).__name__}, not an object")
    return data


_STATUS_REASON = {408: "timed out", 409: "conflict", 429: "rate limited", 529: "overloaded"}


def classify(exc: BaseException) -> LLMError:
    """Map an SDK (or parsing) exception to an LLMError with retry/circuit semantics."""
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, anthropic.APITimeoutError):
        return LLMUnavailable(str(exc), reason="timed out", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return LLMUnavailable(str(exc), reason="connection failed", retryable=True)
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        headers = exc.response.headers if exc.response is not None else None
        retry_after = parse_retry_after(headers)
        should_retry = headers.get("x-should-retry") if headers is not None else None
        api_message = getattr(exc, "api_message", None) or str(exc)
        if status in (408, 409, 429) or status >= 500:
            reason = _STATUS_REASON.get(status, "server error")
            return LLMUnavailable(
                api_message,
                reason=f"{reason}, HTTP {status}",
                status=status,
                retryable=should_retry != "false",
                retry_after=retry_after,
            )
        # 401/403: every call will fail the same way (bad key, no access): treat as an outage.
        outage = status in (401, 403)
        return LLMRequestError(
            api_message,
            reason=f"request rejected, HTTP {status}",
            status=status,
            retryable=should_retry == "true",
            retry_after=retry_after,
            counts_as_outage=outage,
        )
    if isinstance(exc, (json.JSONDecodeError, anthropic.APIResponseValidationError)):
        return MalformedResponseError(str(exc))
    return LLMUnavailable(f"{type(exc).__name__}: {exc}", reason="unexpected error")


# --- fallback generator -----------------------------------------------------------------------


@runtime_checkable
class FailureRecorder(Protocol):
    """Where a failed LLM call is written down (storage.llm_failures.JsonlFailureRecorder)."""

    def record(self, question: str, error: BaseException, **context: Any) -> None: ...


@dataclass(frozen=True)
class _Vectors:
    """The question's embeddings retrieval computed, handed on to whichever generator answers."""

    query: Any = None
    asking: Any = None


class FallbackGenerator:
    """Implements core.pipeline.Generator: `primary`'s answer, or `fallback`'s with a note.

    Never raises: a failure of the primary is recorded (with the question) and answered by the
    fallback; a failure of the recorder is logged; a failure of the fallback yields a short apology.
    """

    def __init__(
        self,
        primary: Any,
        fallback: Any,
        recorder: FailureRecorder | None = None,
        *,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.recorder = recorder
        # The primary's circuit breaker: a chat that stops waiting counts that as a failure, and while
        # the circuit is open nobody waits at all.
        self.breaker = breaker
        self.failures = 0
        self._failures_lock = threading.Lock()

    def generate(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        history: Sequence[Turn] = (),
        query_vector: Any = None,
        asked: str | None = None,
        asking_vectors: Any = None,
    ) -> Answer:
        vectors = _Vectors(query_vector, asking_vectors)
        window = current_window()
        if window is None or (self.breaker is not None and self.breaker.state == CircuitBreaker.OPEN):
            # No one waiting in a chat, or the circuit is open (the primary fails at once): no window needed.
            return self._primary_or_fallback(question, contexts, history, vectors, asked)
        late = run_late(self._primary_or_fallback, question, contexts, history, vectors, asked)
        try:
            return late.result(timeout=window.remaining())
        except FutureTimeout:
            pass
        # The person has waited long enough: the quoted answer now, Claude's when (if) it arrives.
        if self.breaker is not None:
            self.breaker.record_failure()
        window.late = late
        log.info("Claude has not answered within %.0f s; showing the quoted answer first", window.wait_s)
        slow = LLMUnavailable(f"no answer within {window.wait_s:g} s", reason=f"no answer within {window.wait_s:g} s")
        answer = self._fallback_answer(question, contexts, history, slow, vectors)
        if answer.refused and answer.model == "none":  # the fallback failed too: nothing better to show yet
            return answer
        head = f"Claude has not answered within {window.wait_s:g} s"
        if answer.refused:
            note = (
                f"{head}; the quoted-answer fallback found no provision that answers this. "
                "Claude's answer will replace this when it arrives."
            )
        else:
            note = f"{head}; this answer is quoted directly from the provisions and will be replaced by Claude's when it arrives."
        return dataclasses.replace(answer, note=note, diagnostics={**answer.diagnostics, "llm_pending": 1})

    def _primary_or_fallback(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        history: Sequence[Turn],
        vectors: "_Vectors",
        asked: str | None = None,
    ) -> Answer:
        try:
            return self.primary.generate(
                question, contexts, history, vectors.query, asked, asking_vectors=vectors.asking
            )
        except Exception as exc:  # noqa: BLE001 - nothing may reach the caller
            error = exc
        with self._failures_lock:
            self.failures += 1
        self._record(question, error)
        return self._fallback_answer(question, contexts, history, error, vectors)

    def _record(self, question: str, error: BaseException) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder.record(question, error)
        except Exception:  # noqa: BLE001
            log.exception("could not record an LLM failure")

    def _fallback_answer(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        history: Sequence[Turn],
        error: BaseException,
        vectors: "_Vectors",
    ) -> Answer:
        reason = error.reason if isinstance(error, LLMError) else "unexpected error"
        try:
            answer = self.fallback.generate(question, contexts, history, vectors.query, asking_vectors=vectors.asking)
        except Exception:  # noqa: BLE001
            log.exception("fallback generator failed")
            return Answer(
                text="Sorry, I could not answer this question right now. Please try again later.",
                refused=True,
                model="none",
                note=f"Claude was unavailable ({reason}) and the quoted-answer fallback failed.",
                diagnostics={"fallback": 1, "fallback_failed": 1},
            )
        if isinstance(error, UngroundedAnswerError):
            head = "Claude's answer could not be tied to the provisions"
        elif isinstance(error, LLMRefusal):
            head = "Claude declined to answer"
        else:
            head = f"Claude was unavailable ({reason})"
        if answer.refused:
            note = f"{head}; the quoted-answer fallback found no provision that answers this."
        else:
            note = f"{head}; this answer is quoted directly from the provisions."
        spent = getattr(error, "usage", None)
        usage = Usage(
            context_tokens=answer.usage.context_tokens,
            input_tokens=getattr(spent, "input_tokens", 0),
            output_tokens=getattr(spent, "output_tokens", 0),
            cache_creation_input_tokens=getattr(spent, "cache_creation_input_tokens", 0),
            cache_read_input_tokens=getattr(spent, "cache_read_input_tokens", 0),
        )
        diagnostics = dict(getattr(answer, "diagnostics", {}) or {})
        diagnostics["fallback"] = 1
        diagnostics.update(getattr(error, "diagnostics", {}) or {})
        return dataclasses.replace(answer, note=note, usage=usage, diagnostics=diagnostics)


# --- per-model request options --------------------------------------------------------------

# Claude 5-generation models (Haiku/Sonnet/Opus/Fable/Mythos 5, 5.x) reject non-default sampling
# parameters (400) and take `output_config.effort`; the installed SDK has no `temperature` argument
# at all, so when a model does accept it, it is sent through `extra_body`.
_CLAUDE5 = re.compile(r"^claude-(?:haiku|sonnet|opus|fable|mythos)-5(?:-|$|\[)")
_TEMPERATURE_OK = re.compile(r"^claude-(?:(?:haiku|sonnet|opus)-4-5|(?:sonnet|opus)-4-6)(?:-|$|\[)")
_EFFORT_OK = re.compile(r"^claude-(?:(?:sonnet|opus)-4-6|opus-4-[78])(?:-|$|\[)")


def model_request_options(model: str, *, temperature: float | None, effort: str | None) -> dict[str, Any]:
    """Extra `messages.create` arguments that `model` accepts: `temperature` only where the model
    accepts a non-default value (Claude 4.5 and Sonnet/Opus 4.6), `output_config.effort` only where
    the model has the effort parameter (Claude 5 generation, Sonnet/Opus 4.6, Opus 4.7/4.8). Unknown
    models get neither (safe: both are optional)."""
    name = model.strip().lower()
    options: dict[str, Any] = {}
    if temperature is not None and _TEMPERATURE_OK.match(name) and not _CLAUDE5.match(name):
        options["extra_body"] = {"temperature": temperature}
    if effort and (_CLAUDE5.match(name) or _EFFORT_OK.match(name)):
        options["output_config"] = {"effort": effort}
    return options
