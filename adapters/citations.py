"""What every chat front end lists under an answer: one source per citation number, with its quote
only when the answer does not already show it.

An offline answer is made of quotes ("Under 6 RCNY § 5-303(c) (...): “An employer ... must keep ...”
[1]"), so repeating each quote under Sources would show the same words twice; a Claude answer
paraphrases, and there the quote is what lets a reader check it.

Each label keeps the address of the official text it cites (Citation.url, core/links.py): every front
end shows the label as a link to it.
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
    urls: tuple[str, ...] = ()  # the link of each label ("" = none), in the same order

    def linked(self) -> list[tuple[str, str]]:
        """(label, url) pairs; url "" where the label has no link."""
        return list(zip(self.labels, self.urls or ("",) * len(self.labels)))


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
        links: dict[str, str] = {}  # label -> its first non-empty url
        for c in cited:
            links[c.label] = links.get(c.label) or c.url
        out.append(Source(n, tuple(links), "" if in_answer else (quotes[0] if quotes else ""), tuple(links.values())))
    return out
