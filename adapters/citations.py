"""What every chat front end lists under an answer: one source per citation number, with its quote
only when the answer does not already show it.

An offline answer is made of quotes ("Under 6 RCNY § 5-303(c) (...): “An employer ... must keep ...”
[1]"), so repeating each quote under Sources would show the same words twice; a Claude answer
paraphrases, and there the quote is what lets a reader check it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from core.types import Citation

_NOT_ALNUM = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class Source:
    n: int
    labels: tuple[str, ...]  # one per distinct provision cited under this number
    quote: str  # "" when the answer already shows every quote of this number


def _folded(text: str) -> str:
    return _NOT_ALNUM.sub(" ", text.lower()).strip()


def sources(citations: Sequence[Citation], answer_text: str) -> list[Source]:
    """The answer's sources in number order."""
    shown = f" {_folded(answer_text)} "
    by_number: dict[int, list[Citation]] = {}
    for c in citations:
        by_number.setdefault(c.n, []).append(c)
    out = []
    for n in sorted(by_number):
        cited = by_number[n]
        quotes = [c.quote for c in cited if c.quote.strip()]
        in_answer = all(f" {_folded(q)} " in shown for q in quotes)
        out.append(Source(n, tuple(dict.fromkeys(c.label for c in cited)), "" if in_answer else (quotes[0] if quotes else "")))
    return out
