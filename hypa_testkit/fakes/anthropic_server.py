"""A scriptable fake of the Anthropic Messages API on 127.0.0.1, for tests that drive the REAL SDK.

Point `anthropic.Anthropic(base_url=fake.base_url, api_key="test-key")` at it. It speaks the wire
format of `POST /v1/messages`: a JSON `message` object (content blocks, `stop_reason`, `usage`) or an
error body `{"type": "error", "error": {"type": ..., "message": ...}}` with the matching HTTP status.

Generic on purpose (an answer generator, a query rewriter and a triplet extractor can all use it):
a test queues replies, the fake returns them in order and records every request it received.

    with FakeAnthropic() as fake:
        fake.enqueue(reply(message([text_block("Yes.", [char_citation(0, "x", 0, 1)])])))
        fake.enqueue(error_reply(429, "rate_limit_error", "slow down", headers={"retry-after": "0"}))
        fake.enqueue(lambda request: reply(message("echo: " + request.body["model"])))
        fake.enqueue(never_answers())                       # a hung endpoint (released when the fake stops)
        fake.enqueue(held(reply(message("late")), gate))     # answers once the test sets `gate`
        ...
        fake.requests[0].body["system"]   # what the SDK sent

A reply can be a `Reply`, or a callable `(RecordedRequest) -> Reply` for responses that depend on the
request. When the queue is empty the fake answers with `default` if set, otherwise with a 500
`api_error` naming the problem (an unscripted call is a test bug and should fail loudly).
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable, Union

from hypa_testkit.fakes.local_http import FakeAPIHandler, LocalHTTPFake

# --- wire-format builders ---------------------------------------------------------------------

_ids = itertools.count(1)


def char_citation(
    document_index: int,
    cited_text: str,
    start_char_index: int,
    end_char_index: int,
    document_title: str | None = None,
) -> dict:
    """A `char_location` citation, as the API returns for plain-text documents."""
    return {
        "type": "char_location",
        "cited_text": cited_text,
        "document_index": document_index,
        "document_title": document_title,
        "start_char_index": start_char_index,
        "end_char_index": end_char_index,
    }


def cite(document_index: int, document_text: str, quote: str, title: str | None = None) -> dict:
    """A correct `char_location` citation of `quote` (which must occur in `document_text`)."""
    start = document_text.index(quote)
    return char_citation(document_index, quote, start, start + len(quote), title)


def text_block(text: str, citations: list[dict] | None = None) -> dict:
    block: dict[str, Any] = {"type": "text", "text": text}
    if citations is not None:
        block["citations"] = citations
    return block


def usage(
    input_tokens: int = 100,
    output_tokens: int = 20,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> dict:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
    }


def message(
    content: str | list[dict],
    *,
    model: str = "claude-test",
    stop_reason: str = "end_turn",
    usage_: dict | None = None,
) -> dict:
    """A complete Messages API response body. `content` is a string (one text block) or blocks."""
    blocks = [text_block(content)] if isinstance(content, str) else content
    return {
        "id": f"msg_fake_{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage_ if usage_ is not None else usage(),
    }


def error_body(error_type: str, message_: str) -> dict:
    return {"type": "error", "error": {"type": error_type, "message": message_}}


# --- replies ----------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-serialisable; ignored when `raw` is set
    raw: bytes | None = None  # sent as-is (e.g. malformed JSON)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before answering (to exercise client timeouts)
    content_type: str = "application/json"
    # Answer only once this is set (or the fake stops): a test decides when Claude "arrives".
    hold: threading.Event | None = None


def reply(body: Any, *, status: int = 200, headers: dict[str, str] | None = None, delay_s: float = 0.0) -> Reply:
    return Reply(status=status, body=body, headers=dict(headers or {}), delay_s=delay_s)


_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def error_reply(
    status: int | None,
    error_type: str,
    message_: str = "",
    *,
    headers: dict[str, str] | None = None,
    delay_s: float = 0.0,
) -> Reply:
    """An API error. `status=None` uses the status the API pairs with `error_type`."""
    code = status if status is not None else _ERROR_STATUS.get(error_type, 500)
    return Reply(
        status=code,
        body=error_body(error_type, message_ or error_type),
        headers=dict(headers or {}),
        delay_s=delay_s,
    )


def cites_first_document(request: "RecordedRequest", text: str = "The provision says so.",
                         model: str = "claude-sonnet-5-5") -> Reply:
    """An answer to whatever provisions were sent: one sentence citing the start of the first document
    (use as `fake.enqueue(cites_first_document)` when the test does not know the retrieved chunks)."""
    document = request.body["messages"][-1]["content"][0]["source"]["data"]
    return reply(message([text_block(text, [cite(0, document, document[: min(len(document), 60)])])], model=model))


def held(reply_: Reply, gate: threading.Event) -> Reply:
    """`reply_`, sent only once `gate` is set (a test releases it when Claude should answer)."""
    return Reply(status=reply_.status, body=reply_.body, raw=reply_.raw, headers=dict(reply_.headers),
                 content_type=reply_.content_type, hold=gate)


def never_answers() -> Reply:
    """An endpoint that accepts the connection, reads the request and never answers (until the fake
    stops): what a hung API or a stuck proxy looks like to the client."""
    return Reply(status=504, body=error_body("api_error", "the fake never answered"), hold=threading.Event())


def rate_limited(retry_after_s: float = 0.0) -> Reply:
    return error_reply(429, "rate_limit_error", "Rate limited.", headers={"retry-after": f"{retry_after_s:g}"})


def overloaded() -> Reply:
    return error_reply(529, "overloaded_error", "Overloaded")


def malformed(raw: bytes = b'{"id": "msg_1", "type": "message", "content": [') -> Reply:
    return Reply(status=200, raw=raw)


ReplySpec = Union[Reply, Callable[["RecordedRequest"], Reply]]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON (None if the body was not JSON)
    raw: bytes
    received_at: float  # time.monotonic()


# --- the server -------------------------------------------------------------------------------


class FakeAnthropic(LocalHTTPFake):
    """Runs on 127.0.0.1 in a background thread; use as a context manager or call start()/stop()."""

    thread_name = "fake-anthropic"

    def __init__(self, default: ReplySpec | None = None) -> None:
        self.default = default
        self.requests: list[RecordedRequest] = []
        self._queue: deque[ReplySpec] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._released = threading.Event()

    # -- scripting ---------------------------------------------------------------------------

    def enqueue(self, *replies: ReplySpec) -> "FakeAnthropic":
        with self._lock:
            self._queue.extend(replies)
        return self

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST" and r.path.startswith("/v1/messages")]

    @property
    def last_body(self) -> Any:
        return self.requests[-1].body

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self.origin

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    def _release_waiters(self) -> None:
        self._stopping.set()  # releases handlers sleeping in a scripted delay

    # -- request handling ----------------------------------------------------------------------

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            spec = self._queue.popleft() if self._queue else self.default
        if spec is None:
            return error_reply(500, "api_error", f"fake: no scripted reply for {request.method} {request.path}")
        return spec(request) if callable(spec) else spec

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _hold(self, gate: threading.Event) -> None:
        while not (gate.is_set() or self._stopping.is_set() or self._released.is_set()):
            gate.wait(0.05)

    def release_held(self) -> None:
        """Answer every held request now (a `never_answers()` one with its 504), and any held later."""
        self._released.set()


def _make_handler(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(FakeAPIHandler):
        def handle_request(self) -> None:
            raw = self.read_body()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = RecordedRequest(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                raw=raw,
                received_at=time.monotonic(),
            )
            out = fake._next_reply(request)
            if out.delay_s > 0:
                fake._sleep(out.delay_s)
            if out.hold is not None:
                fake._hold(out.hold)
            payload = out.raw if out.raw is not None else json.dumps(out.body).encode("utf-8")
            headers = {"request-id": f"req_fake_{len(fake.requests):04d}", **out.headers}
            self.send_payload(out.status, payload, out.content_type, headers)

    return Handler
