"""The two things a comparison question compares ("importer vs distributor", "the difference between
the AI Office and the AI Board", "How do fines for X compare with fines for Y?").

Searched as one question, the side with more of the question's words takes every place and the
answer describes one thing only; each side is therefore also ranked on its own (core/pipeline.py)
so that the provision about each is read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from core.text import content_terms, message_sentences

# Where a side may start or end: a sentence or clause boundary.
_BOUNDARIES = "?.!;:,()[]—–"
# The words between the sides, found first so that the sides are cut out by position (a side
# pattern tried at every start is quadratic in the message's length).
_BETWEEN = re.compile(
    r"\s(?:vs\.?|versus|compared\s+(?:with|to)|(?:any\s+)?differ(?:ent|s)?\s+from|(?:in\s+)?the\s+same\s+way(?:\s+as|(?=\s+(?:we|they|you|i)\s)))\s",
    re.I,
)
_DIFFERENCE = re.compile(r"\bdifferences?\s+between\s", re.I)
_COMPARE = re.compile(r"\s+compare[sd]?\s+(?:with|to|against)\s", re.I)
# "is the notice the same for outside candidates and for employees up for promotion?"
_SAME_FOR = re.compile(r"\bthe\s+same\s+for\s", re.I)
# What opens a first side without naming it: "do the ways we may deliver the notice differ for
# outside applicants vs …" compares outside applicants; the rest sets the scene.
_ASKS_HOW_DIFFERENT = re.compile(r"^.*\b(?:differ(?:s|ent)?|the\s+same)\s+(?:for|between|with|in)\s+", re.I)
_HOW = re.compile(r"\bhow\s+(?:do|does|is|are)\s", re.I)
# Words that open the clause, not a side: "so", "what's the actual".
_LEADING = re.compile(
    r"^(?:(?:so|ok|okay|and|but|hey|hi)\s+)*(?:what(?:'s| is| are)\s+(?:the\s+)?(?:actual\s+|real\s+|practical\s+)?)?",
    re.I,
)
MAX_SIDE_WORDS = 14
MAX_NAME_WORDS = 3  # a side this short is a name ("importer", "AI Board"), searched with the rest


@dataclass(frozen=True)
class Comparison:
    first: str
    second: str
    rest: str  # the question's other sentences ("we resell a US vendor's software ...")
    # What is compared for both sides when it is said before them ("is the conformity assessment
    # route different for X vs Y": "the conformity assessment route"), part of `rest`.
    scene: str = ""

    def between_names(self) -> bool:
        """Whether both sides are names ("provider vs deployer"), not descriptions."""
        return all(len(side.split()) <= MAX_NAME_WORDS for side in (self.first, self.second))

    def side_queries(self) -> tuple[str, str]:
        """What to search for each side: the side, with the rest of the question when the side is
        only a name ("importer" -> "importer; we resell a US vendor's AI software in the EU")."""
        def query(side: str) -> str:
            if len(side.split()) <= MAX_NAME_WORDS and self.rest:
                return f"{side} {self.rest}"
            return f"{side} {self.scene}" if self.scene else side

        return query(self.first), query(self.second)


def compared(question: str) -> Comparison | None:
    """The comparison `question` asks for, or None when it compares nothing."""
    for first, second, whole, scene in _candidates(question):
        first = _LEADING.sub("", first.strip()).strip()
        framing = _ASKS_HOW_DIFFERENT.match(first)
        if framing is not None:  # the scene is set before the sides, not after them
            first, second, setting = first[framing.end() :], second.strip(), framing.group(0).strip()
        elif scene is not None:
            second, setting = second.strip(), scene.strip()
        else:
            second, setting = _without_setting(first, second.strip())
        if _side(first) and _side(second):
            others = [s.strip() for s in message_sentences(question) if s.strip() and whole not in s]
            before = setting if framing is not None or scene is not None else ""
            return Comparison(first, second, " ".join([setting, *others]).strip(), before)
    return None


# "historical data and test data for the bias audit": what follows the second of two names says
# where both are compared, unless the first side has such a phrase of its own ("notice for
# candidates and notice for employees") or is no name ("what has to go on the careers page versus
# what goes in the notice").
_SETTING = re.compile(r"\s+(?:for|under|in|within|according\s+to|as\s+per)\s+", re.I)


def _without_setting(first: str, second: str) -> tuple[str, str]:
    """The second side without a closing phrase that sets the scene of the comparison, and that phrase."""
    m = _SETTING.search(second)
    if m is None or _SETTING.search(first) or len(first.split()) > MAX_NAME_WORDS:
        return second, ""
    if not 0 < len(second[: m.start()].split()) <= MAX_NAME_WORDS:
        return second, ""
    return second[: m.start()], second[m.start() :].strip()


def _candidates(question: str) -> Iterator[tuple[str, str, str, str | None]]:
    """(first side, second side, the text holding both, the scene set before the sides, None when
    a scene may follow them) of each way `question` may compare."""
    for m in _DIFFERENCE.finditer(question):
        if (pair := _and_pair(question, m)) is not None:
            yield *pair, None
    for m in _COMPARE.finditer(question):
        hows = list(_HOW.finditer(question, _last_boundary(question, m.start()), m.start()))
        if hows:
            how, end = hows[-1], _next_boundary(question, m.end())
            yield question[how.end() : m.start()], question[m.end() : end], question[how.start() : end], None
    for m in _SAME_FOR.finditer(question):
        if (pair := _and_pair(question, m)) is not None:
            first, second, whole = pair
            second = re.sub(r"^(?:for|to)\s+", "", second.strip(), flags=re.I)
            yield first, second, whole, question[_last_boundary(question, m.start()) : m.start()]
    for m in _BETWEEN.finditer(question):
        start, end = _last_boundary(question, m.start()), _next_boundary(question, m.end())
        yield question[start : m.start()], question[m.end() : end], question[start:end], None


def _and_pair(question: str, m: re.Match[str]) -> tuple[str, str, str] | None:
    """The two sides joined by "and" in the clause after `m` ("the difference between *X and Y*",
    "the same for *X and for Y*"), with the text from `m` holding both; None without an "and"."""
    pair = question[m.end() : _next_boundary(question, m.end())]
    first, sep, second = pair.partition(" and ")
    return (first, second, question[m.start() : m.end() + len(pair)]) if sep else None


def _last_boundary(text: str, at: int) -> int:
    return max(text.rfind(c, 0, at) for c in _BOUNDARIES) + 1


def _next_boundary(text: str, at: int) -> int:
    found = [i for i in (text.find(c, at) for c in _BOUNDARIES) if i >= 0]
    return min(found) if found else len(text)


def _side(text: str) -> bool:
    return bool(content_terms(text)) and len(text.split()) <= MAX_SIDE_WORDS
