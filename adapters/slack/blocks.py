"""Block Kit messages: the answer with numbered sources and 👍/👎 buttons, the placeholder, failures.

Slack's limits shape this module: a section's text is at most 3,000 characters, a message at most
50 blocks, and `text` is what notifications and screen readers show instead of the blocks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from adapters.citations import sources
from adapters.slack.text import answer_mrkdwn, escape_mrkdwn, link_mrkdwn, split_text
from core.conversation import Rating, Reply

SECTION_CHARS = 3000
MAX_BLOCKS = 50
FALLBACK_CHARS = 3000
QUOTE_CHARS = 200
MAX_SOURCES = 10
# A source line longer than this (many long links under one number) shows its labels without links, so
# that line and its quote fit one section and no cut falls inside `<url|label>`.
LINKS_CHARS = SECTION_CHARS - QUOTE_CHARS - 20

ACTION_UPVOTE = "feedback_up"
ACTION_DOWNVOTE = "feedback_down"
FEEDBACK_ACTIONS: dict[str, Rating] = {ACTION_UPVOTE: 1, ACTION_DOWNVOTE: -1}
ACTION_ASK_PERSON = "ask_person"  # posts the exchange to the review channel
ACTION_SHARE = "share_answer"  # on a private (/hypa) answer: post it in the channel

PLACEHOLDER_TEXT = "Looking that up… :mag:"
FAILURE_TEXT = (
    "Sorry, something went wrong while answering, so I have no answer for you this time. "
    "Please try again in a minute; if it keeps happening, tell the team that runs this bot."
)
REFUSAL_PREFIX = "*Not answered.*"

# Blocks the answer may not use: a heading, a sources header + sources, divider, note, actions.
_RESERVED_BLOCKS = 7


@dataclass(frozen=True)
class SlackMessage:
    text: str  # notification / accessibility fallback
    blocks: list[dict]


def _section(mrkdwn: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn}}


def _context(mrkdwn: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn}]}


def _fallback(text: str) -> str:
    """The top-level `text`: Slack reads it as mrkdwn (notifications, and the message itself when the
    blocks are rejected), so `& < >` are escaped like the blocks' text; a cut never splits an entity."""
    text = escape_mrkdwn(" ".join(text.split()))
    if len(text) <= FALLBACK_CHARS:
        return text
    return re.sub(r"&[a-z]*$", "", text[: FALLBACK_CHARS - 1]) + "…"


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def source_lines(reply: Reply) -> list[str]:
    """One line per cited number: "*[1]* <url|label> — “quote”" (a number citing two provisions lists
    both; a label links to the official text when it has an address; the quote only when the answer
    does not show it already)."""
    listed = sources(reply.citations, reply.text)
    lines = []
    for source in listed[:MAX_SOURCES]:
        line = f"*[{source.n}]* " + "; ".join(link_mrkdwn(label, url) for label, url in source.linked())
        if len(line) > LINKS_CHARS:  # a section would cut it inside a link's markup: labels alone
            line = f"*[{source.n}]* " + "; ".join(escape_mrkdwn(label) for label in source.labels)
        if source.quote:
            line += f" — _“{escape_mrkdwn(_shorten(source.quote, QUOTE_CHARS))}”_"
        lines.append(line)
    hidden = len(listed) - MAX_SOURCES
    if hidden > 0:
        lines.append(f"_…and {hidden} more source{'s' if hidden > 1 else ''}_")
    return lines


def _button(action_id: str, text: str, value: str, *, style: str = "") -> dict:
    button = {"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": text, "emoji": True},
              "value": value}
    if style:
        button["style"] = style
    return button


def feedback_buttons(answer_id: str, *, shareable: bool = False) -> dict:
    """👍 / 👎 / "Ask a person" under an answer; "Share in channel" first on a private (/hypa) answer."""
    elements = [_button(ACTION_SHARE, "Share in channel", answer_id, style="primary")] if shareable else []
    return {
        "type": "actions",
        "block_id": "feedback",
        "elements": elements + [
            {
                "type": "button",
                "action_id": ACTION_UPVOTE,
                "text": {"type": "plain_text", "text": "👍 Helpful", "emoji": True},
                "value": answer_id,
            },
            {
                "type": "button",
                "action_id": ACTION_DOWNVOTE,
                "text": {"type": "plain_text", "text": "👎 Not helpful", "emoji": True},
                "value": answer_id,
            },
            _button(ACTION_ASK_PERSON, "Ask a person", answer_id),
        ],
    }


def render_reply(reply: Reply, *, shareable: bool = False, heading: str = "") -> SlackMessage:
    """The answer (split across sections), its numbered sources, an optional note and the buttons
    (👍/👎/Ask a person; "Share in channel" too when `shareable`: a private answer). `heading` (mrkdwn,
    escaped by the caller) goes first, e.g. who asked what, on an answer shared in a channel."""
    body = answer_mrkdwn(reply.text) or "_(empty answer)_"
    if reply.refused:
        body = f"{REFUSAL_PREFIX} {body}"
    pieces = split_text(body, SECTION_CHARS)
    room = MAX_BLOCKS - _RESERVED_BLOCKS
    if len(pieces) > room:  # only a runaway answer gets here (~130,000 characters)
        pieces = pieces[: room - 1] + [_shorten(pieces[room - 1], SECTION_CHARS - 40) + " _(answer cut short)_"]
    blocks = ([_context(heading)] if heading else []) + [_section(p) for p in pieces]

    lines = source_lines(reply)
    if lines:
        blocks.append(_context("*Sources*"))
        blocks.extend(_section(chunk) for chunk in split_text("\n".join(lines), SECTION_CHARS)[:2])
    if reply.note:
        blocks.append(_context(f"_{escape_mrkdwn(_shorten(reply.note, 300))}_"))
    blocks.append({"type": "divider"})
    blocks.append(feedback_buttons(reply.answer_id, shareable=shareable))

    fallback = ("Not answered: " if reply.refused else "") + reply.text
    return SlackMessage(text=_fallback(fallback) or "(empty answer)", blocks=blocks[:MAX_BLOCKS])


def render_placeholder() -> SlackMessage:
    return SlackMessage(text=PLACEHOLDER_TEXT, blocks=[_context(PLACEHOLDER_TEXT)])


def render_failure() -> SlackMessage:
    return SlackMessage(text=FAILURE_TEXT, blocks=[_section(f":warning: {FAILURE_TEXT}")])


def feedback_acknowledgement(rating: Rating, changed: bool) -> str:
    """The ephemeral note a user sees after clicking 👍/👎."""
    thumb = "👍" if rating > 0 else "👎"
    if not changed:
        return f"You had already rated this answer {thumb}; nothing changed."
    return f"Thanks, your {thumb} is recorded. It helps the team review and improve the answers."


UNKNOWN_ANSWER_TEXT = "I could not find that answer any more, so the rating was not saved."
NOT_SHOWN_HERE_TEXT = "That rating button does not belong to an answer in this channel, so the rating was not saved."
