"""A fake Telegram Bot API on 127.0.0.1, for tests that drive the REAL python-telegram-bot library.

Point PTB at it with `base_url=fake.base_url` (and `base_file_url=fake.base_file_url`). It speaks the
Bot API wire format: `POST /bot<token>/<method>` with form-encoded parameters (PTB JSON-encodes
non-string values), answered with `{"ok": true, "result": ...}` or
`{"ok": false, "error_code": ..., "description": ..., "parameters": {...}}`.

    with FakeTelegram() as fake:
        fake.push_updates(message(update_id=1, message_id=10, chat=private_chat(), text="What is a widget audit?"))
        fake.rate_limit_next("sendMessage", retry_after=1)      # one 429, then normal service
        sent = fake.wait_for("editMessageText")                  # blocks until PTB called it (or fails)
        fake.bot_messages(chat_id)                               # what the chat shows now (after edits)

Methods: getMe, getUpdates (queued updates; otherwise an empty result after a short wait; honours
`offset` like Telegram: updates below it are confirmed and dropped), sendMessage (an inline keyboard kept
as the message's `reply_markup`; a ForceReply, which Telegram never echoes, as `sent_reply_markup`),
editMessageText, editMessageReplyMarkup (an edit that changes nothing is Telegram's 400 "message is not modified"),
deleteMessage, answerCallbackQuery, sendChatAction, setWebhook, deleteWebhook, getWebhookInfo,
setMessageReaction. Every call is recorded; an unknown method is a 404 (an unscripted call is a test bug).

Text sent with `parse_mode=HTML` is checked like Telegram checks it (telegram_html): only its tags,
properly nested, `<a>` with an href, `& < >` escaped; anything else is Telegram's 400 "can't parse
entities". Messages keep the HTML as their `text`; `telegram_html(text).links` lists its links.
"""
from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl

from hypa_testkit.fakes.local_http import FakeAPIHandler, LocalHTTPFake

TOKEN = "123456:TEST-token"
BOT_ID = 777000111
BOT_USERNAME = "hypa_test_bot"

# Parameters PTB sends JSON-encoded (objects, lists, numbers); everything else is a plain string.
_JSON_PARAMS = {
    "reply_markup", "reply_parameters", "allowed_updates", "reaction", "link_preview_options", "entities",
    "chat_id", "message_id", "offset", "limit", "timeout", "reply_to_message_id", "show_alert",
    "drop_pending_updates", "max_connections", "cache_time", "disable_notification", "is_big",
}
# How long an empty getUpdates waits for an update before answering "no updates" (Telegram: `timeout`).
_EMPTY_POLL_WAIT_S = 0.3


@dataclass(frozen=True)
class ApiCall:
    method: str
    params: dict[str, Any]
    at: float  # time.monotonic()
    status: int  # the HTTP status the fake answered with


@dataclass
class _ScriptedError:
    method: str
    status: int
    body: dict


class FakeTelegram(LocalHTTPFake):
    """Runs in a background thread; use as a context manager or call start()/stop()."""

    thread_name = "fake-telegram"

    def __init__(self, token: str = TOKEN, bot_id: int = BOT_ID, username: str = BOT_USERNAME) -> None:
        self.token = token
        self.bot_user = {
            "id": bot_id, "is_bot": True, "first_name": "Hypa", "username": username,
            "can_join_groups": True, "can_read_all_group_messages": False, "supports_inline_queries": False,
        }
        self.calls: list[ApiCall] = []
        self.webhook: dict[str, Any] = {}
        self._pending: list[dict] = []  # updates not yet confirmed by an offset
        self._errors: deque[_ScriptedError] = deque()
        self._chats: dict[int, dict] = {}
        self._messages: dict[tuple[int, int], dict] = {}  # (chat id, message id) -> the bot's message now
        self._message_ids = itertools.count(50_000)
        self._cond = threading.Condition()
        self._stopping = threading.Event()

    # -- scripting -------------------------------------------------------------------------------

    def push_updates(self, *updates: dict) -> None:
        """Queue updates for getUpdates (all at once: one batch can hold duplicates of an update_id)."""
        with self._cond:
            for update in updates:
                self._remember_chats(update)
                self._pending.append(update)
            self._cond.notify_all()

    def remember_chat(self, chat: dict) -> None:
        """Chats the fake knows (so sent messages carry the right chat type); updates register theirs."""
        with self._cond:
            self._chats[chat["id"]] = chat

    def rate_limit_next(self, method: str, retry_after: int = 1) -> None:
        """The next call of `method` gets Telegram's flood-control error (HTTP 429 with retry_after)."""
        body = {
            "ok": False, "error_code": 429, "description": f"Too Many Requests: retry after {retry_after}",
            "parameters": {"retry_after": retry_after},
        }
        with self._cond:
            self._errors.append(_ScriptedError(method, 429, body))

    def fail_next(self, method: str, status: int = 400, description: str = "Bad Request: scripted") -> None:
        with self._cond:
            self._errors.append(_ScriptedError(method, status, {"ok": False, "error_code": status, "description": description}))

    # -- inspection ------------------------------------------------------------------------------

    def calls_of(self, method: str) -> list[ApiCall]:
        with self._cond:
            return [c for c in self.calls if c.method == method]

    def wait_for(
        self, method: str, count: int = 1, timeout: float = 10.0, where: Callable[[ApiCall], bool] | None = None
    ) -> list[ApiCall]:
        """Block until `count` successful calls of `method` (matching `where`) arrived; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [
                    c for c in self.calls
                    if c.method == method and c.status == 200 and (where is None or where(c))
                ]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(c.method, c.status) for c in self.calls]
                    raise AssertionError(f"fake Telegram: wanted {count} x {method}, got {len(found)}; calls: {seen}")
                self._cond.wait(left)

    def bot_messages(self, chat_id: int) -> list[dict]:
        """The bot's messages in a chat as they look now (edits applied, deletions removed), oldest first."""
        with self._cond:
            return [m for (c, _), m in sorted(self._messages.items()) if c == chat_id]

    def pending_updates(self) -> int:
        with self._cond:
            return len(self._pending)

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"{self.origin}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.origin}/file/bot"

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    def _release_waiters(self) -> None:
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()  # releases long polls

    # -- the API ---------------------------------------------------------------------------------

    def _call(self, method: str, params: dict[str, Any]) -> tuple[int, dict]:
        with self._cond:
            scripted = next((e for e in self._errors if e.method == method), None)
            if scripted is not None:
                self._errors.remove(scripted)
                self._record(method, params, scripted.status)
                return scripted.status, scripted.body
        if method == "getUpdates":
            result = self._get_updates(params)  # waits outside the lock's critical section
            with self._cond:
                self._record(method, params, 200)
            return 200, {"ok": True, "result": result}
        with self._cond:
            handler = self._methods().get(method)
            if handler is None:
                self._record(method, params, 404)
                return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
            status, body = handler(params)
            self._record(method, params, status)
            return status, body

    def _record(self, method: str, params: dict, status: int) -> None:
        self.calls.append(ApiCall(method, params, time.monotonic(), status))
        self._cond.notify_all()

    def _methods(self) -> dict[str, Callable[[dict], tuple[int, dict]]]:
        def ok(result: object) -> tuple[int, dict]:
            return 200, {"ok": True, "result": result}

        return {
            "getMe": lambda p: ok(self.bot_user),
            "sendMessage": lambda p: _unparsable(p) or ok(self._send(p)),
            "editMessageText": lambda p: _unparsable(p) or self._edit(p),
            "editMessageReplyMarkup": self._edit_markup,
            "deleteMessage": self._delete,
            "answerCallbackQuery": lambda p: ok(True),
            "sendChatAction": lambda p: ok(True),
            "setMessageReaction": lambda p: ok(True),
            "setWebhook": lambda p: (self.webhook.update(p), ok(True))[1],
            "deleteWebhook": lambda p: (self.webhook.clear(), ok(True))[1],
            "getWebhookInfo": lambda p: ok({"url": self.webhook.get("url", ""), "has_custom_certificate": False,
                                            "pending_update_count": len(self._pending)}),
            "close": lambda p: ok(True),
        }

    def _get_updates(self, params: dict) -> list[dict]:
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        wait = min(float(params.get("timeout") or 0), _EMPTY_POLL_WAIT_S)
        deadline = time.monotonic() + wait
        with self._cond:
            while True:
                if offset:
                    self._pending = [u for u in self._pending if u["update_id"] >= offset]
                if self._pending or self._stopping.is_set():
                    return list(self._pending[:limit])
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                self._cond.wait(left)

    def _send(self, p: dict) -> dict:
        chat_id = int(p["chat_id"])
        message = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": self._chats.get(chat_id, {"id": chat_id, "type": "private" if chat_id > 0 else "group"}),
            "from": self.bot_user,
            "text": p.get("text", ""),
        }
        markup = p.get("reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        elif markup:
            # ForceReply (and reply keyboards) act on the user's client; Telegram never returns them as the
            # message's reply_markup (an inline keyboard only). Kept for tests, not a Bot API field.
            message["sent_reply_markup"] = markup
        reply_to = (p.get("reply_parameters") or {}).get("message_id") or p.get("reply_to_message_id")
        if reply_to:
            message["reply_to_message_id"] = reply_to  # recorded for tests (not a Bot API field)
        self._messages[(chat_id, message["message_id"])] = message
        return message

    def _edit(self, p: dict) -> tuple[int, dict]:
        key = (int(p["chat_id"]), int(p["message_id"]))
        message = self._messages.get(key)
        if message is None:
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
        if message["text"] == p.get("text", "") and message.get("reply_markup") == (p.get("reply_markup") or None):
            return 400, {"ok": False, "error_code": 400, "description": (
                "Bad Request: message is not modified: specified new message content and reply markup are "
                "exactly the same as a current content and reply markup of the message")}
        message = {**message, "text": p.get("text", ""), "edit_date": int(time.time())}
        message.pop("reply_markup", None)
        if p.get("reply_markup"):
            message["reply_markup"] = p["reply_markup"]
        self._messages[key] = message
        return 200, {"ok": True, "result": message}

    def _edit_markup(self, p: dict) -> tuple[int, dict]:
        key = (int(p["chat_id"]), int(p["message_id"]))
        message = self._messages.get(key)
        if message is None:
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
        message = {k: v for k, v in message.items() if k != "reply_markup"}
        if p.get("reply_markup"):
            message["reply_markup"] = p["reply_markup"]
        self._messages[key] = message
        return 200, {"ok": True, "result": message}

    def _delete(self, p: dict) -> tuple[int, dict]:
        self._messages.pop((int(p["chat_id"]), int(p["message_id"])), None)
        return 200, {"ok": True, "result": True}

    def _remember_chats(self, update: dict) -> None:
        for key in ("message", "edited_message", "message_reaction"):
            if key in update:
                chat = update[key]["chat"]
                self._chats[chat["id"]] = chat
        if "callback_query" in update and "message" in update["callback_query"]:
            chat = update["callback_query"]["message"]["chat"]
            self._chats[chat["id"]] = chat


# --- parse_mode=HTML, as Telegram reads it (core.telegram.org/bots/api#html-style) ----------------------

_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre",
         "blockquote", "tg-emoji"}
_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);")


class TelegramHTMLError(ValueError):
    pass


@dataclass
class TelegramHTML:
    text: str = ""  # what the chat shows
    links: list[tuple[str, str]] = field(default_factory=list)  # (href, the linked text)


class _HTMLReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.out = TelegramHTML()
        self.open: list[tuple[str, str, int]] = []  # (tag, href, where its text starts)

    def handle_starttag(self, tag, attrs):
        if tag not in _TAGS:
            raise TelegramHTMLError(f"unsupported start tag \"{tag}\"")
        href = dict(attrs).get("href") or ""
        if tag == "a" and not href:
            raise TelegramHTMLError("a link without href")
        self.open.append((tag, href, len(self.out.text)))

    def handle_endtag(self, tag):
        if not self.open or self.open[-1][0] != tag:
            raise TelegramHTMLError(f"unmatched end tag \"{tag}\"")
        _, href, start = self.open.pop()
        if tag == "a":
            self.out.links.append((href, self.out.text[start:]))

    def handle_data(self, data):
        if "<" in data or ">" in data:
            raise TelegramHTMLError("unescaped < or >")
        self.out.text += data

    def handle_entityref(self, name):
        if name not in ("lt", "gt", "amp", "quot"):
            raise TelegramHTMLError(f"unsupported entity &{name};")
        self.out.text += {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}[name]

    def handle_charref(self, name):
        self.out.text += chr(int(name[1:], 16) if name[0] in "xX" else int(name))


def telegram_html(text: str) -> TelegramHTML:
    """What Telegram makes of `text` with parse_mode=HTML (TelegramHTMLError where it refuses it)."""
    for m in re.finditer("&", text):
        if not _ENTITY.match(text, m.start()):
            raise TelegramHTMLError(f"unescaped & at byte offset {m.start()}")
    reader = _HTMLReader()
    reader.feed(text)
    reader.close()
    if reader.open:
        raise TelegramHTMLError(f"can't find end tag corresponding to start tag \"{reader.open[-1][0]}\"")
    return reader.out


def _unparsable(p: dict) -> tuple[int, dict] | None:
    """Telegram's 400 for HTML text it cannot parse, else None."""
    if str(p.get("parse_mode", "")).upper() != "HTML":
        return None
    try:
        telegram_html(p.get("text", ""))
    except TelegramHTMLError as exc:
        return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: can't parse entities: {exc}"}
    return None


def _parse_params(content_type: str, raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    if content_type.startswith("application/json"):
        return json.loads(raw)
    params: dict[str, Any] = {}
    for key, value in parse_qsl(raw.decode("utf-8"), keep_blank_values=True):
        if key in _JSON_PARAMS:
            try:
                params[key] = json.loads(value)
                continue
            except ValueError:
                pass
        params[key] = value
    return params


def _make_handler(fake: FakeTelegram) -> type[BaseHTTPRequestHandler]:
    class Handler(FakeAPIHandler):
        def handle_request(self) -> None:
            raw = self.read_body()
            prefix = f"/bot{fake.token}/"
            if not self.path.startswith(prefix):
                status, body = 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
            else:
                method = self.path[len(prefix):].split("?", 1)[0]
                try:
                    params = _parse_params(self.headers.get("content-type", ""), raw)
                    status, body = fake._call(method, params)
                except (ValueError, KeyError) as exc:
                    status, body = 400, {"ok": False, "error_code": 400, "description": f"Bad Request: {exc}"}
            self.send_payload(status, json.dumps(body).encode("utf-8"), "application/json")

    return Handler


# --- update builders (the JSON Telegram sends) -------------------------------------------------------


def user(user_id: int = 4242, first_name: str = "Ada") -> dict:
    return {"id": user_id, "is_bot": False, "first_name": first_name}


def private_chat(chat_id: int = 4242) -> dict:
    return {"id": chat_id, "type": "private", "first_name": "Ada"}


def group_chat(chat_id: int = -100123, title: str = "Compliance team") -> dict:
    return {"id": chat_id, "type": "supergroup", "title": title}


def message(
    *, update_id: int, message_id: int, chat: dict, text: str | None = None, from_user: dict | None = None,
    reply_to: dict | None = None, entities: list[dict] | None = None, extra: dict | None = None,
) -> dict:
    msg: dict[str, Any] = {
        "message_id": message_id, "date": int(time.time()), "chat": chat, "from": from_user or user(),
    }
    if text is not None:
        msg["text"] = text
    if entities:
        msg["entities"] = entities
    if reply_to is not None:
        msg["reply_to_message"] = reply_to
    msg.update(extra or {})
    return {"update_id": update_id, "message": msg}


def mention_entities(text: str, username: str = BOT_USERNAME) -> list[dict]:
    """A `mention` entity for '@username' in text (offsets in UTF-16 code units, like Telegram)."""
    at = text.index("@" + username)
    offset = len(text[:at].encode("utf-16-le")) // 2
    return [{"type": "mention", "offset": offset, "length": len(username) + 1}]


def callback_query(*, update_id: int, data: str, message_: dict, from_user: dict | None = None) -> dict:
    return {
        "update_id": update_id,
        "callback_query": {
            "id": f"cbq-{update_id}", "from": from_user or user(), "chat_instance": "ci-1",
            "message": message_, "data": data,
        },
    }


def reaction(
    *, update_id: int, chat: dict, message_id: int, old: list[str], new: list[str], from_user: dict | None = None
) -> dict:
    return {
        "update_id": update_id,
        "message_reaction": {
            "chat": chat, "message_id": message_id, "user": from_user or user(), "date": int(time.time()),
            "old_reaction": [{"type": "emoji", "emoji": e} for e in old],
            "new_reaction": [{"type": "emoji", "emoji": e} for e in new],
        },
    }
