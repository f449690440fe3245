"""Reply -> Telegram HTML messages: escaped text, numbered sources with short quotes, 👍/👎 buttons.

Telegram limits a message to 4,096 characters, so a long answer becomes several messages. Splitting
happens on the plain text *before* escaping and between whole HTML blocks, so a cut never falls
inside a tag or an entity such as `&amp;`. Lengths are counted in UTF-16 code units (what Telegram
counts; an emoji is two), which is never less than the character count — the safe side.
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from adapters.citations import sources
from core.conversation import Rating, Reply

TELEGRAM_TEXT_LIMIT = 4096
CALLBACK_DATA_LIMIT = 64  # bytes (Bot API limit for InlineKeyboardButton.callback_data)
QUOTE_CHARS = 200
LABEL_CHARS = 200
FEEDBACK_PREFIX = "fb"
ASK_PERSON_PREFIX = "ap"  # 'ap:<answer id>': adapters/telegram/review.py
ASK_PERSON_TEXT = "🙋 Ask a person"
THUMBS_UP, THUMBS_DOWN = "👍", "👎"

# C0/C1 control characters other than tab and newline: Telegram rejects or mangles them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class RenderedReply:
    parts: list[str]  # HTML messages, each within the limit; the first replaces the placeholder
    keyboard: InlineKeyboardMarkup | None  # goes on the last part


def _escape(text: str) -> str:
    """&, < and > only: quotes need no escaping outside attributes (Telegram's HTML has none here)."""
    return html.escape(text, quote=False)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def clean(text: str) -> str:
    return _CONTROL.sub("", text)


def feedback_callback_data(answer_id: str, rating: int) -> str | None:
    """'fb:+:<answer id>' / 'fb:-:<answer id>', or None when the id is too long for 64 bytes."""
    data = f"{FEEDBACK_PREFIX}:{'+' if rating > 0 else '-'}:{answer_id}"
    return data if len(data.encode("utf-8")) <= CALLBACK_DATA_LIMIT else None


def parse_feedback_callback(data: str | None) -> tuple[str, Rating] | None:
    """(answer id, +1/-1) from callback data made by `feedback_callback_data`, else None."""
    parts = (data or "").split(":", 2)
    if len(parts) != 3 or parts[0] != FEEDBACK_PREFIX or parts[1] not in ("+", "-") or not parts[2]:
        return None
    return parts[2], 1 if parts[1] == "+" else -1


def feedback_keyboard(answer_id: str) -> InlineKeyboardMarkup | None:
    """👍 / 👎 on the first row, "Ask a person" (posts the exchange to the review chat) on the second."""
    up, down = feedback_callback_data(answer_id, 1), feedback_callback_data(answer_id, -1)
    if not answer_id or up is None or down is None:
        return None
    return InlineKeyboardMarkup([
        [InlineKeyboardButton(THUMBS_UP, callback_data=up), InlineKeyboardButton(THUMBS_DOWN, callback_data=down)],
        [InlineKeyboardButton(ASK_PERSON_TEXT, callback_data=f"{ASK_PERSON_PREFIX}:{answer_id}")],
    ])


def render_reply(reply: Reply, limit: int = TELEGRAM_TEXT_LIMIT) -> RenderedReply:
    blocks = [_escape(piece) for piece in split_plain(clean(reply.text).strip() or "(no answer)", limit)]
    if reply.note:
        blocks.append(f"<i>{_escape(_shorten(clean(reply.note), 300))}</i>")
    blocks.extend(_source_blocks(reply, limit))
    return RenderedReply(parts=pack_blocks(blocks, limit), keyboard=feedback_keyboard(reply.answer_id))


def render_plain(text: str, limit: int = TELEGRAM_TEXT_LIMIT) -> list[str]:
    """A bot notice (help text, an apology) as escaped HTML messages."""
    return pack_blocks([_escape(p) for p in split_plain(clean(text).strip() or "…", limit)], limit)


def _source_blocks(reply: Reply, limit: int = TELEGRAM_TEXT_LIMIT) -> list[str]:
    """One block per cited number; its quote only when the answer does not show it already. A block
    is never split (a cut could fall inside a tag): one whose links would not fit a message shows its
    labels without them."""
    if not reply.citations:
        return []
    blocks = ["<b>Sources</b>"]
    for source in sources(reply.citations, reply.text):
        quote = _shorten(" ".join(clean(source.quote).split()), QUOTE_CHARS)
        for with_links in (True, False):
            labels = "; ".join(_link(_shorten(clean(label), LABEL_CHARS), url if with_links else "")
                               for label, url in source.linked())
            head = f"[{source.n}] <b>{labels}</b>"
            block = f"{head}\n<i>“{_escape(quote)}”</i>" if quote else head
            if utf16_len(block) <= limit:
                break
        blocks.append(block)
    return blocks


def _link(label: str, url: str) -> str:
    """The label as a link to its official text (escaped, the address as an attribute), or alone."""
    if not url:
        return _escape(label)
    return f'<a href="{html.escape(clean(url), quote=True)}">{_escape(label)}</a>'


def _shorten(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def split_plain(text: str, limit: int) -> list[str]:
    """Cut plain text into pieces whose *escaped* form fits `limit`, preferring paragraph, line, then word breaks."""
    return list(_split_plain(text, limit))


def _split_plain(text: str, limit: int) -> Iterator[str]:
    def fits(s: str) -> bool:
        return utf16_len(_escape(s)) <= limit

    while text:
        if fits(text):
            yield text
            return
        lo, hi = 1, len(text)  # the longest prefix that fits (escaped length grows with the prefix)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(text[:mid]) else (lo, mid - 1)
        cut = lo
        for sep in ("\n\n", "\n", " "):
            at = text.rfind(sep, 0, cut)
            if at > cut // 2:
                cut = at
                break
        piece, text = text[:cut].rstrip(), text[cut:].lstrip()
        if piece:
            yield piece


def pack_blocks(blocks: list[str], limit: int) -> list[str]:
    """Join whole HTML blocks (each within `limit`) into as few messages as fit, blank line between blocks."""
    parts: list[str] = []
    current = ""
    for block in blocks:
        candidate = f"{current}\n\n{block}" if current else block
        if utf16_len(candidate) <= limit:
            current = candidate
        else:
            if current:
                parts.append(current)
            current = block
    if current:
        parts.append(current)
    return parts
