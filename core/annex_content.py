"""The annex a provision hands its content to.

"The EU declaration of conformity shall contain the information set out in Annex V": what goes into
the declaration is written in Annex V, not in Art. 47. A question asking for it ("What info has to
go into the EU declaration of conformity?") ranks Art. 47(2) among the first provisions, but Annex V,
which shares few of the question's words, far below what the contexts hold. So when one of the first
provisions hands such content to an annex ("the information set out in", "the criteria specified
in", "an offence referred to in" Annex X), that annex follows it, read in its own order, as far as
ANNEX_WORDS allow (the context budget still applies after). Only the first such provision's: a
provision further down that names the legislation Annex I lists is not what was asked.

Only for a question asking what something contains or which kinds there are (core/asks.py), and not
where a provision names the systems or practices an annex lists ("high-risk AI systems referred to
in Annex III"): that names a category, it hands over no content.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from core.asks import asks_kinds, asks_list
from core.types import Chunk, ScoredChunk

# How many of the first provisions are read for a hand-over.
HANDING_PROVISIONS = 3
# How much of a handed-to annex follows its provision (an annex of lists is cut into small chunks).
ANNEX_WORDS = 250
_HANDS_TO = re.compile(
    r"(?P<before>\w+)\s+(?:set\s+out|specified|listed|laid\s+down|contained|referred\s+to)\s+in\s+Annex\s+(?P<annex>[IVXLC]+)\b",
    re.IGNORECASE,
)
# What an annex lists rather than says: "AI systems referred to in Annex III".
_CATEGORY_NOUNS = frozenset({"system", "systems", "practice", "practices", "model", "models"})


# What a question asks for when it asks what something holds: "What has to go into the technical
# documentation?", "what's actually in that part?", "which crimes ...?", "is there a list?"
_ASKS_CONTENT = re.compile(
    r"\bwhat\b[^?.]{0,80}?\b(?:go(?:es)?\s+in(?:to)?|(?:be\s+)?(?:written|included|put|listed|stated)\s+(?:in|on)|in\s+(?:it|that|there))\b"
    r"|\bwhat(?:'s|\s+is)\s+(?:actually\s+)?in\b"
    r"|\bwhich\s+(?:crimes|offences|offenses|laws|legislation|criteria|fields|details|items)\b"
    r"|\bis\s+there\s+(?:an?\s+)?(?:actual\s+|official\s+)?list\b",
    re.IGNORECASE,
)


def asks_for_content(question: str) -> bool:
    """Whether `question` asks what something holds or which kinds there are (the hand-over's condition)."""
    return asks_list(question) or asks_kinds(question) or _ASKS_CONTENT.search(question) is not None


def annexes_handed_to(text: str) -> list[str]:
    """The annexes `text` hands content to, as units ("annex:V"), in the order it names them."""
    found = (m for m in _HANDS_TO.finditer(text) if m.group("before").lower() not in _CATEGORY_NOUNS)
    return list(dict.fromkeys(f"annex:{m.group('annex').upper()}" for m in found))


def with_annex_content(
    ranked: Sequence[ScoredChunk], chunks: Sequence[Chunk], units: Sequence[str | None]
) -> list[ScoredChunk]:
    """`ranked` with, right after the first of its first provisions that hands content to an annex,
    that annex's chunks in the annex's order (`chunks`: the collection's, in document order, `units`: the
    unit each belongs to). Each chunk appears once; scores stay those of the places."""
    order: list[ScoredChunk] = []
    placed: set[str] = set()
    handed: list[str] = []  # the annexes the first provision that hands content over names
    for place, sc in enumerate(ranked):
        if sc.chunk.id in placed:
            continue
        order.append(sc)
        placed.add(sc.chunk.id)
        if place >= HANDING_PROVISIONS or handed:
            continue
        handed = annexes_handed_to(sc.chunk.text)
        for annex in handed:
            words = 0
            for chunk, unit in zip(chunks, units):
                if unit != annex or chunk.id in placed:
                    continue
                words += len(chunk.text.split())
                if words > ANNEX_WORDS:
                    break
                order.append(ScoredChunk(chunk, 0.0))
                placed.add(chunk.id)
    # a chunk moved up takes the score of the place it takes, so scores still fall with the rank
    scores = [sc.score for sc in ranked] + [ranked[-1].score if ranked else 0.0] * len(order)
    return [replace(sc, score=scores[i]) for i, sc in enumerate(order)]
