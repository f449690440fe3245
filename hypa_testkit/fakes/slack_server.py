"""A fake Slack on 127.0.0.1 for tests that drive the REAL slack-bolt app and slack_sdk client.

Two halves, like the real thing:

* `FakeSlack` — the Web API (`https://slack.com/api/<method>`): point the app's client at it with
  `SLACK_API_BASE_URL=fake.base_url`. It speaks the wire format (form-encoded or JSON bodies,
  `Authorization: Bearer`, `{"ok": ...}` replies, 429 + `Retry-After`), keeps the messages it was
  sent with their metadata (so `chat.update` edits and `conversations.replies` reads them) and
  records every call.
  Script failures with `fake.fail_next("chat.postMessage", status=429, retry_after=0)` or
  `fake.fail_next("chat.update", error="msg_too_long")`.
  Also: `views.open` (the views are kept in `fake.views`), `chat.postEphemeral` (kept in
  `fake.ephemerals`), `chat.getPermalink`, `conversations.history`, and interaction `response_url`s:
  `fake.response_url("cmd-1")` is a URL on the fake; what the app POSTs there is recorded as calls of
  the pseudo-method "response_url" (the JSON body, plus `_path`), answered "ok" like Slack.
* `SlackEvents` — Slack's side of the Events API: builds event envelopes, slash commands and
  interactivity payloads (`block_actions`, `view_submission`) and POSTs them to the app signed with
  the v0 scheme (the algorithm of `slack_sdk.signature.SignatureVerifier`), optionally forged, stale
  or as a retry.

`serve_in_thread(asgi_app)` runs an ASGI app under uvicorn on a free 127.0.0.1 port (lifespan on),
so requests go through a real HTTP server, exactly as Slack's would.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import itertools
import json
import socket
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
from slack_sdk.signature import SignatureVerifier

from hypa_testkit.fakes.local_http import FakeAPIHandler, LocalHTTPFake

BOT_USER_ID = "UBOT0001"
BOT_ID = "BBOT0001"
TEAM_ID = "T0TEAM01"


@dataclass(frozen=True)
class SlackCall:
    method: str  # "chat.postMessage"
    params: dict[str, Any]  # form fields / JSON body / query, merged; `blocks` parsed from JSON
    headers: dict[str, str]  # lower-cased names
    at: float  # time.monotonic()

    @property
    def token(self) -> str:
        return self.headers.get("authorization", "").removeprefix("Bearer ").strip()


@dataclass
class ScriptedFailure:
    status: int = 200
    error: str = ""  # the `error` of an {"ok": false} body
    retry_after: float | None = None  # seconds, sent as Retry-After


@dataclass
class StoredMessage:
    channel: str
    ts: str
    text: str
    blocks: list[dict] = field(default_factory=list)
    thread_ts: str | None = None
    user: str = BOT_USER_ID
    edits: int = 0
    metadata: dict | None = None  # Slack message metadata (event_type, event_payload)


class FakeSlack(LocalHTTPFake):
    """The Slack Web API; use as a context manager or call start()/stop()."""

    thread_name = "fake-slack"

    def __init__(self, *, bot_user_id: str = BOT_USER_ID, bot_id: str = BOT_ID, team_id: str = TEAM_ID) -> None:
        self.bot_user_id, self.bot_id, self.team_id = bot_user_id, bot_id, team_id
        self.calls: list[SlackCall] = []
        self.messages: dict[tuple[str, str], StoredMessage] = {}
        self.socket_mode_url = ""  # what apps.connections.open returns (Socket Mode tests)
        self.views: list[dict] = []  # views.open: {"trigger_id", "view"}
        self.ephemerals: list[dict] = []  # chat.postEphemeral: {"channel", "user", "text", "blocks", "thread_ts"}
        self._failures: dict[str, deque[ScriptedFailure]] = defaultdict(deque)
        self._ts = itertools.count(1)
        self._changed = threading.Condition()

    # -- scripting and inspection ---------------------------------------------------------------

    def fail_next(
        self, method: str, *, status: int = 200, error: str = "", retry_after: float | None = None, times: int = 1
    ) -> FakeSlack:
        """The next `times` calls of `method` fail: `status=429, retry_after=0` rate-limits them;
        `error="channel_not_found"` answers 200 {"ok": false, "error": ...}."""
        if status == 429 and not error:
            error = "ratelimited"
        with self._changed:
            self._failures[method].extend(ScriptedFailure(status, error, retry_after) for _ in range(times))
        return self

    def reset(self) -> None:
        """Forget calls, messages and scripted failures (a fresh Slack for the next test)."""
        with self._changed:
            self.calls.clear()
            self.messages.clear()
            self.views.clear()
            self.ephemerals.clear()
            self._failures.clear()

    def calls_to(self, method: str) -> list[SlackCall]:
        with self._changed:
            return [c for c in self.calls if c.method == method]

    def thread(self, channel: str, thread_ts: str) -> list[StoredMessage]:
        """Messages the bot has (still) in a thread, oldest first."""
        with self._changed:
            found = [m for m in self.messages.values() if m.channel == channel and m.thread_ts == thread_ts]
        return sorted(found, key=lambda m: float(m.ts))

    def wait_for(self, predicate: Callable[[], Any], timeout_s: float = 10.0, what: str = "") -> Any:
        """Block until `predicate()` is truthy (re-checked after every call); its value, or AssertionError."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    methods = [c.method for c in self.calls]
                    raise AssertionError(f"timed out waiting for {what or predicate}; calls so far: {methods}")
                self._changed.wait(min(remaining, 0.05))

    def wait_quiet(self, quiet_s: float = 0.3, timeout_s: float = 10.0) -> None:
        """Block until no call arrived for `quiet_s` (to assert that nothing MORE happens)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._changed:
                last = self.calls[-1].at if self.calls else 0.0
            if time.monotonic() - last >= quiet_s:
                return
            time.sleep(0.02)
        raise AssertionError("the fake Slack API never went quiet")

    def response_url(self, name: str) -> str:
        """An interaction's response_url that lands on this fake (recorded as "response_url" calls)."""
        return f"{self.origin}/hooks/{name}"

    def responses(self, name: str | None = None) -> list[dict]:
        """What the app POSTed to response URLs (to the one named `name`, or all), oldest first."""
        return [c.params for c in self.calls_to("response_url") if name is None or c.params.get("_path") == f"/hooks/{name}"]

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"{self.origin}/api/"

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    # -- the API ---------------------------------------------------------------------------------

    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    def _respond(self, call: SlackCall) -> tuple[int, dict, dict[str, str]]:
        """(status, JSON body, extra headers) for one call; records it and wakes waiters."""
        with self._changed:
            self.calls.append(call)
            failure = self._failures[call.method].popleft() if self._failures[call.method] else None
            try:
                if failure is not None:
                    headers = {} if failure.retry_after is None else {"Retry-After": f"{failure.retry_after:g}"}
                    return failure.status, {"ok": False, "error": failure.error or "fatal_error"}, headers
                if not call.token:
                    return 200, {"ok": False, "error": "not_authed"}, {}
                return 200, self._dispatch(call.method, call.params), {"X-OAuth-Scopes": "chat:write"}
            finally:
                self._changed.notify_all()

    def _hook(self, call: SlackCall) -> None:
        with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    def _dispatch(self, method: str, p: dict[str, Any]) -> dict:
        if method == "auth.test":
            return {
                "ok": True, "url": "https://fake.slack.test/", "team": "Fake Team", "user": "hypa",
                "team_id": self.team_id, "user_id": self.bot_user_id, "bot_id": self.bot_id,
                "is_enterprise_install": False,
            }
        if method == "apps.connections.open":
            if not self.socket_mode_url:
                return {"ok": False, "error": "socket_mode_not_configured"}
            return {"ok": True, "url": self.socket_mode_url}
        if method == "chat.postMessage":
            if not p.get("channel"):
                return {"ok": False, "error": "channel_not_found"}
            if not (p.get("text") or p.get("blocks")):
                return {"ok": False, "error": "no_text"}
            ts = self._next_ts()
            msg = StoredMessage(p["channel"], ts, p.get("text", ""), p.get("blocks") or [], p.get("thread_ts"),
                                metadata=p.get("metadata") if isinstance(p.get("metadata"), dict) else None)
            self.messages[(msg.channel, ts)] = msg
            return {"ok": True, "channel": msg.channel, "ts": ts, "message": _wire(msg)}
        if method == "chat.update":
            msg = self.messages.get((p.get("channel", ""), p.get("ts", "")))
            if msg is None:
                return {"ok": False, "error": "message_not_found"}
            msg.text, msg.blocks, msg.edits = p.get("text", ""), p.get("blocks") or [], msg.edits + 1
            return {"ok": True, "channel": msg.channel, "ts": msg.ts, "text": msg.text, "message": _wire(msg)}
        if method == "chat.delete":
            if self.messages.pop((p.get("channel", ""), p.get("ts", "")), None) is None:
                return {"ok": False, "error": "message_not_found"}
            return {"ok": True, "channel": p["channel"], "ts": p["ts"]}
        if method == "chat.postEphemeral":
            if not (p.get("channel") and p.get("user")):
                return {"ok": False, "error": "channel_not_found" if not p.get("channel") else "user_not_in_channel"}
            self.ephemerals.append({k: p.get(k) for k in ("channel", "user", "text", "blocks", "thread_ts")})
            return {"ok": True, "message_ts": self._next_ts()}
        if method == "views.open":
            view = p.get("view")
            if isinstance(view, str):
                view = json.loads(view)
            if not p.get("trigger_id"):
                return {"ok": False, "error": "invalid_trigger_id"}
            if not isinstance(view, dict) or view.get("type") != "modal" or not view.get("blocks"):
                return {"ok": False, "error": "invalid_arguments"}
            self.views.append({"trigger_id": p["trigger_id"], "view": view})
            return {"ok": True, "view": {"id": f"V{len(self.views):08d}", **view}}
        if method == "chat.getPermalink":
            if not (p.get("channel") and p.get("message_ts")):
                return {"ok": False, "error": "message_not_found"}
            ts = str(p["message_ts"]).replace(".", "")
            return {"ok": True, "channel": p["channel"], "permalink": f"https://fake.slack.test/archives/{p['channel']}/p{ts}"}
        if method == "conversations.history":
            latest = float(p.get("latest") or "inf")
            found = sorted((m for m in self.messages.values() if m.channel == p.get("channel") and float(m.ts) <= latest),
                           key=lambda m: float(m.ts), reverse=True)
            return {"ok": True, "messages": [_wire(m) for m in found[: int(p.get("limit") or 100)]], "has_more": False}
        if method in ("reactions.add", "reactions.remove"):
            return {"ok": True}
        if method == "conversations.replies":
            found = [m for m in self.messages.values() if m.channel == p.get("channel") and
                     (m.thread_ts == p.get("ts") or m.ts == p.get("ts"))]
            metadata = str(p.get("include_all_metadata", "")).lower() in ("1", "true")
            return {"ok": True, "messages": [_wire(m, metadata) for m in sorted(found, key=lambda m: float(m.ts))],
                    "has_more": False}
        return {"ok": False, "error": "unknown_method"}


def _wire(m: StoredMessage, with_metadata: bool = False) -> dict:
    out = {"type": "message", "user": m.user, "bot_id": BOT_ID, "text": m.text, "ts": m.ts, "blocks": m.blocks}
    if m.thread_ts:
        out["thread_ts"] = m.thread_ts
    if with_metadata and m.metadata:  # Slack returns metadata only when asked (include_all_metadata)
        out["metadata"] = m.metadata
    return out


def block_texts(blocks: list[dict]) -> list[str]:
    """The mrkdwn of a message's section and context blocks, in order (what a Slack client shows as text)."""
    texts = []
    for b in blocks:
        if b["type"] == "section":
            texts.append(b["text"]["text"])
        elif b["type"] == "context":
            texts.extend(e["text"] for e in b["elements"])
    return texts


def _parse_params(content_type: str, raw: bytes, query: str) -> dict[str, Any]:
    params: dict[str, Any] = dict(parse_qsl(query))
    if raw:
        if "json" in content_type:
            params.update(json.loads(raw))
        else:
            params.update(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
    for key in ("blocks", "attachments", "view"):
        if isinstance(params.get(key), str):  # form-encoded requests send them as JSON strings
            with contextlib.suppress(ValueError):
                params[key] = json.loads(params[key])
    return params


def _make_handler(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(FakeAPIHandler):
        def handle_request(self) -> None:
            url = urlsplit(self.path)
            raw = self.read_body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                params = _parse_params(headers.get("content-type", ""), raw, url.query)
            except ValueError:
                params = {}
            if url.path.startswith("/hooks/"):  # an interaction's response_url: Slack answers "ok"
                fake._hook(SlackCall("response_url", {**params, "_path": url.path}, headers, time.monotonic()))
                self.send_payload(200, b"ok", "text/plain; charset=utf-8")
                return
            method = url.path.rsplit("/", 1)[-1]
            status, body, extra = fake._respond(SlackCall(method, params, headers, time.monotonic()))
            self.send_payload(status, json.dumps(body).encode("utf-8"), "application/json; charset=utf-8", extra)

    return Handler


# --- Slack's side of the Events API --------------------------------------------------------------

_event_ids = itertools.count(1)
_message_ts = itertools.count(1)


def new_event_id() -> str:
    return f"Ev{next(_event_ids):08d}"


def new_ts() -> str:
    """A user message ts (distinct from the bot's: these start at 1,600,000,000)."""
    return f"{1_600_000_000 + next(_message_ts)}.000200"


def envelope(event: dict, *, event_id: str | None = None, team_id: str = TEAM_ID) -> dict:
    """An Events API `event_callback` body."""
    return {
        "token": "legacy-verification-token",
        "team_id": team_id,
        "api_app_id": "A0APP0001",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or new_event_id(),
        "event_time": int(time.time()),
        "authorizations": [{"team_id": team_id, "user_id": BOT_USER_ID, "is_bot": True}],
    }


def mention_event(text: str, *, user: str = "UALICE01", channel: str = "C0GENERAL", ts: str | None = None,
                  thread_ts: str | None = None) -> dict:
    event = {"type": "app_mention", "user": user, "text": text, "ts": ts or new_ts(), "channel": channel,
             "event_ts": "0"}
    if thread_ts:
        event["thread_ts"] = thread_ts
    event["event_ts"] = event["ts"]
    return event


def message_event(text: str, *, user: str = "UALICE01", channel: str = "C0GENERAL", channel_type: str = "channel",
                  ts: str | None = None, thread_ts: str | None = None, **extra: Any) -> dict:
    event = {"type": "message", "user": user, "text": text, "ts": ts or new_ts(), "channel": channel,
             "channel_type": channel_type}
    if thread_ts:
        event["thread_ts"] = thread_ts
    event["event_ts"] = event["ts"]
    event.update(extra)
    return event


def slack_now() -> str:
    """Slack's clock as it stamps events and actions ("1700000000.123456")."""
    return f"{time.time():.6f}"


def reaction_event(kind: str, reaction: str, *, channel: str, ts: str, user: str = "UALICE01",
                   event_ts: str | None = None) -> dict:
    """`kind` is "reaction_added" or "reaction_removed"; `event_ts` is when it happened (default: now)."""
    return {"type": kind, "user": user, "reaction": reaction, "item_user": BOT_USER_ID,
            "item": {"type": "message", "channel": channel, "ts": ts}, "event_ts": event_ts or slack_now()}


def block_actions(action_id: str, value: str, *, channel: str, message_ts: str, thread_ts: str | None = None,
                  user: str = "UALICE01", team_id: str = TEAM_ID, action_ts: str | None = None,
                  blocks: list[dict] | None = None, is_ephemeral: bool = False, response_url: str | None = None,
                  trigger_id: str | None = None) -> dict:
    """An interactivity `block_actions` payload (a button click on a bot message; `is_ephemeral` for a
    message only the clicker sees, which Slack sends without `message`). `blocks`: the message's blocks,
    as Slack includes them."""
    message = {"type": "message", "user": BOT_USER_ID, "ts": message_ts, "text": "answer", "blocks": blocks or []}
    if thread_ts:
        message["thread_ts"] = thread_ts
    payload = {
        "type": "block_actions",
        "team": {"id": team_id, "domain": "fake"},
        "user": {"id": user, "username": "alice", "team_id": team_id},
        "api_app_id": "A0APP0001",
        "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": False,
                      **({"thread_ts": thread_ts} if thread_ts else {})},
        "trigger_id": trigger_id or new_trigger_id(),
        "channel": {"id": channel, "name": "general"},
        "message": message,
        "response_url": response_url or "https://hooks.slack.test/actions/1",
        "actions": [{"action_id": action_id, "block_id": "feedback", "value": value, "type": "button",
                     "action_ts": action_ts or slack_now()}],
    }
    if is_ephemeral:
        payload["container"]["is_ephemeral"] = True
        del payload["message"]
    return payload


_triggers = itertools.count(1)


def new_trigger_id() -> str:
    return f"{next(_triggers)}.{int(time.time())}.abcdef0123"


def slash_command(text: str, *, response_url: str, command: str = "/hypa", user: str = "UALICE01",
                  channel: str = "C0GENERAL", team_id: str = TEAM_ID, trigger_id: str | None = None) -> dict[str, str]:
    """The form fields Slack POSTs for a slash command."""
    return {
        "token": "legacy-verification-token", "team_id": team_id, "team_domain": "fake", "channel_id": channel,
        "channel_name": "general", "user_id": user, "user_name": "alice", "command": command, "text": text,
        "api_app_id": "A0APP0001", "is_enterprise_install": "false", "response_url": response_url,
        "trigger_id": trigger_id or new_trigger_id(),
    }


def view_submission(view: dict, values: dict, *, user: str = "UALICE01", team_id: str = TEAM_ID) -> dict:
    """A `view_submission` payload for a modal the app opened (`view` as passed to views.open), with the
    inputs' `values` ({block_id: {action_id: {...}}}, Slack's `view.state.values`)."""
    return {
        "type": "view_submission",
        "team": {"id": team_id, "domain": "fake"},
        "user": {"id": user, "username": "alice", "team_id": team_id},
        "api_app_id": "A0APP0001",
        "token": "legacy-verification-token",
        "trigger_id": new_trigger_id(),
        "view": {**view, "id": "V0MODAL01", "team_id": team_id, "state": {"values": values}, "hash": "1.abc",
                 "app_id": "A0APP0001", "bot_id": BOT_ID},
        "response_urls": [],
    }


class SlackEvents:
    """POSTs signed requests to the app's /slack/events, as Slack does."""

    def __init__(self, url: str, signing_secret: str, *, client: httpx.Client | None = None) -> None:
        self.url = url
        self.signing_secret = signing_secret
        self.client = client or httpx.Client(timeout=10)

    def headers(self, body: str | bytes, *, timestamp: int | None = None, secret: str | None = None,
                retry_num: int | None = None, content_type: str = "application/json") -> dict[str, str]:
        ts = str(int(time.time()) if timestamp is None else timestamp)
        if isinstance(body, bytes):  # Slack signs the bytes it sends (slack_sdk's helper takes only UTF-8)
            mac = hmac.new((secret or self.signing_secret).encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
            signature = "v0=" + mac.hexdigest()
        else:
            signature = SignatureVerifier(secret or self.signing_secret).generate_signature(timestamp=ts, body=body)
        headers = {"content-type": content_type, "x-slack-request-timestamp": ts, "x-slack-signature": signature}
        if retry_num is not None:
            headers["x-slack-retry-num"] = str(retry_num)
            headers["x-slack-retry-reason"] = "http_timeout"
        return headers

    def send(self, body: dict, **signing: Any) -> httpx.Response:
        raw = json.dumps(body)
        return self.client.post(self.url, content=raw, headers=self.headers(raw, **signing))

    def send_command(self, fields: dict[str, str], **signing: Any) -> httpx.Response:
        """A slash command, form-encoded and signed like Slack's."""
        raw = urlencode(fields)
        headers = self.headers(raw, content_type="application/x-www-form-urlencoded", **signing)
        return self.client.post(self.url, content=raw, headers=headers)

    def send_interaction(self, payload: dict, **signing: Any) -> httpx.Response:
        raw = urlencode({"payload": json.dumps(payload)})
        headers = self.headers(raw, content_type="application/x-www-form-urlencoded", **signing)
        return self.client.post(self.url, content=raw, headers=headers)

    def close(self) -> None:
        self.client.close()


# --- running the app under a real HTTP server ----------------------------------------------------


@contextlib.contextmanager
def serve_in_thread(asgi_app: Any, *, timeout_s: float = 10.0) -> Iterator[str]:
    """Serve `asgi_app` with uvicorn on a free 127.0.0.1 port; yields the base URL ("http://127.0.0.1:N").

    Leaving the block shuts the server down gracefully (the app's lifespan shutdown runs).
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(asgi_app, lifespan="on", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=timeout_s)
        sock.close()
