"""Slack text in both directions: a user's message -> a plain question; our text -> escaped mrkdwn.

Slack sends message text in its own markup (`<@U123>` mentions, `<https://x|label>` links, `:emoji:`
codes, `&amp;`-escaped `& < >`); the pipeline wants the words a person typed. Going out, `& < >`
must be escaped or Slack reads them as markup (a quoted "<@channel>" would ping everyone).
"""
from __future__ import annotations

import re

from core.conversation import Rating

# <@U123>, <@U123|name>, <#C123|general>, <!here>, <!subteam^S1|@team>, <https://x|label>, <mailto:a@b>
_ANGLE = re.compile(r"<([^<>|]*)(?:\|([^<>]*))?>")
# :emoji: and :emoji::skin-tone-3: shortcodes, not inside words or times ("10:30:00")
_EMOJI = re.compile(r"(?<![\w:]):[a-z0-9_+'\-]+:(?::skin-tone-[2-6]:)?(?![\w])")
# C0 control characters (and DEL) except tab and newline: they carry no meaning in a question.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_MARKDOWN_BOLD = re.compile(r"\*\*(.+?)\*\*", re.DOTALL)

_RATING_BY_REACTION: dict[str, Rating] = {"+1": 1, "thumbsup": 1, "-1": -1, "thumbsdown": -1}


def mentions(text: str, user_id: str) -> bool:
    """Whether Slack text mentions the user (`<@U123>` or `<@U123|name>`)."""
    return bool(user_id) and (f"<@{user_id}>" in text or f"<@{user_id}|" in text)


def to_question(text: str, bot_user_id: str = "") -> str:
    """The question a person typed: bot mention removed, Slack markup and emoji codes resolved."""

    def resolve(match: re.Match) -> str:
        target, label = match.group(1), match.group(2)
        if target.startswith("@"):
            return "" if target[1:] == bot_user_id else "@" + (label or target[1:])
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            return label or "@" + target[1:].split("^")[0]
        return label or target.removeprefix("mailto:")

    plain = _ANGLE.sub(resolve, text or "")
    plain = _EMOJI.sub(" ", plain)
    plain = plain.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    plain = _CONTROL.sub(" ", plain)
    return re.sub(r"[ \t]+", " ", plain).strip()


def escape_mrkdwn(text: str) -> str:
    """Escape the three characters Slack treats as markup; everything else is shown as written."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link_mrkdwn(label: str, url: str) -> str:
    """`<url|label>` (the label alone without a url). Both escaped: `& < >` as entities, and in the
    address `|` `<` `>` `"` percent-encoded, since they would end the link markup."""
    shown = escape_mrkdwn(label)
    if not url:
        return shown
    target = url.replace("|", "%7C").replace("<", "%3C").replace(">", "%3E").replace('"', "%22").replace(" ", "%20")
    return f"<{escape_mrkdwn(target)}|{shown}>"


def answer_mrkdwn(text: str) -> str:
    """An answer for a mrkdwn section: escaped, Markdown **bold** turned into Slack's *bold*."""
    return _MARKDOWN_BOLD.sub(r"*\1*", escape_mrkdwn(text))


def rating_for_reaction(name: str) -> Rating | None:
    """+1 / -1 for thumbs reactions (any skin tone: "+1::skin-tone-2"), None for every other emoji."""
    return _RATING_BY_REACTION.get(name.split("::", 1)[0])


def split_text(text: str, limit: int) -> list[str]:
    """Split text into pieces of at most `limit` characters, at paragraph, line, sentence or word ends.

    Never cuts inside an `&amp;`-style entity, so escaped text stays valid in every piece.
    """
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = -1
        for sep in ("\n\n", "\n", ". ", "; ", " "):
            at = window.rfind(sep)
            if at >= limit // 2:
                cut = at + len(sep)
                break
        if cut <= 0:
            cut = limit
            amp = window.rfind("&", max(0, limit - 6))
            if amp != -1 and ";" not in window[amp:]:
                cut = amp  # an entity would be split: cut before it
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces
