"""The annex a provision hands its content to.

"The EU declaration of conformity shall contain the information set out in Annex V": what goes into
the declaration is written in Annex V, not in Art. 47. A question asking for it ("What info has to
go into the EU declaration of conformity?") ranks Art. 47(2) among the first provisions, but Annex V,
which shares few of the question's words, far below what the contexts hold. So when one of the first
provisions hands such content to an annex ("the information set out in", "the criteria specified
in", "an offence referred to in" Annex X), that annex follows it, read in its own order, as far as
ANNEX_WORDS allow (the context budget still applies after). Only the first such provision's, and
only an annex the ranking found somewhere among its candidates: a provision that mentions in passing
"the legislation listed in Section A of Annex I" does not make that list what was asked.

Only for a question asking what something holds or which kinds there are (`asks_for_content`), and
not where a provision names the systems or practices an annex lists ("high-risk AI systems referred to
in Annex III"): that names a category, it hands over no content.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.asks import asks_kinds, asks_list
from core.thread_units import unit_of_label
from core.types import Chunk, ScoredChunk, with_scores_of_places

# How many of the first provisions are read for a hand-over.
HANDING_PROVISIONS = 3
# How much of a handed-to annex follows its provision (an annex of lists is cut into small chunks).
ANNEX_WORDS = 250
_HANDS_TO = re.compile(
    r"(?P<before>\w+)\s+(?:set\s+out|specified|listed|laid\s+down|contained|referred\s+to)\s+in\s+"
    r"(?:Section\s+(?P<section>[A-D])\s+of\s+)?Annex\s+(?P<annex>[IVXLC]+)\b",
    re.IGNORECASE,
)
# What an annex lists rather than says: "AI systems referred to in Annex III".
_CATEGORY_NOUNS = frozenset({"system", "systems", "practice", "practices", "model", "models"})


# What a question asks for when it asks what something holds: "What has to go into the technical
# documentation?", "what's actually in that part?", "which crimes ...?", "is there a list?"
_ASKS_CONTENT = re.compile(
    r"\bwhat\b[^?.]{0,80}?\b(?:go(?:es)?\s+in(?:to)?|(?:be\s+)?(?:written|included|listed|stated)\s+(?:in|on)|in\s+(?:it|that|there))\b"
    r"|\bwhat(?:'s|\s+is)\s+(?:actually\s+)?in\b"
    r"|\bwhich\s+(?:crimes|offences|offenses|laws|legislation|criteria|fields|details|items)\b"
    r"|\bis\s+there\s+(?:an?\s+)?(?:actual\s+|official\s+)?list\b",
    re.IGNORECASE,
)


def asks_for_content(question: str) -> bool:
    """Whether `question` asks what something holds or which kinds there are (the hand-over's condition)."""
    return asks_list(question) or asks_kinds(question) or _ASKS_CONTENT.search(question) is not None


@dataclass(frozen=True)
class HandedTo:
    """An annex (as a unit, "annex:VIII") or one section of it ("data listed in Section C of Annex VIII")."""

    unit: str
    section: str | None = None

    def holds(self, chunk: Chunk, unit: str | None) -> bool:
        return unit == self.unit and (self.section is None or f"Section {self.section}" in chunk.label)


def annexes_handed_to(text: str) -> list[HandedTo]:
    """The annexes (or their sections) `text` hands content to, in the order it names them."""
    found = (m for m in _HANDS_TO.finditer(text) if m.group("before").lower() not in _CATEGORY_NOUNS)
    return list(
        dict.fromkeys(
            HandedTo(f"annex:{m.group('annex').upper()}", m.group("section").upper() if m.group("section") else None)
            for m in found
        )
    )


def with_annex_content(
    ranked: Sequence[ScoredChunk], chunks: Sequence[Chunk], units: Sequence[str | None]
) -> list[ScoredChunk]:
    """`ranked` with, right after the first of its first provisions that hands content to an annex,
    that annex's chunks in the annex's order (`chunks`: the collection's, in document order, `units`: the
    unit each belongs to). Each chunk appears once; scores stay those of the places."""
    ranked_units = [unit_of_label(r.chunk.label) for r in ranked]
    order: list[ScoredChunk] = []
    placed: set[str] = set()
    handed: list[HandedTo] = []  # what the first provision that hands content over names
    for place, sc in enumerate(ranked):
        if sc.chunk.id in placed:
            continue
        order.append(sc)
        placed.add(sc.chunk.id)
        if place >= HANDING_PROVISIONS or handed:
            continue
        # an annex none of whose chunks the ranking found anywhere near is not what was asked about
        # ("a product covered by the legislation listed in Section A of Annex I" for a question on
        # what goes into the technical documentation)
        handed = [a for a in annexes_handed_to(sc.chunk.text) if any(a.holds(r.chunk, u) for r, u in zip(ranked, ranked_units))]
        for annex in handed:
            words = 0
            for chunk, unit in zip(chunks, units):
                if not annex.holds(chunk, unit) or chunk.id in placed:
                    continue
                words += len(chunk.text.split())
                if words > ANNEX_WORDS:
                    break
                order.append(ScoredChunk(chunk, 0.0))
                placed.add(chunk.id)
    return with_scores_of_places(order, ranked)
