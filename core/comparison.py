"""The two things a comparison question compares ("importer vs distributor", "the difference between
the AI Office and the AI Board", "How do fines for X compare with fines for Y?").

Searched as one question, the side with more of the question's words takes every place and the
answer describes one thing only; each side is therefore also ranked on its own (core/pipeline.py)
so that the provision about each is read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.text import content_terms

# Where a side may start or end: a sentence or clause boundary.
_EDGE = r"[^?.!;:,()\[\]—–]"
_PATTERNS = (
    re.compile(rf"\bdifferences?\s+between\s+(?P<x>{_EDGE}+?)\s+and\s+(?P<y>{_EDGE}+)", re.I),
    re.compile(rf"\bhow\s+(?:do|does|is|are)\s+(?P<x>{_EDGE}+?)\s+compare[sd]?\s+(?:with|to|against)\s+(?P<y>{_EDGE}+)", re.I),
    re.compile(rf"(?P<x>{_EDGE}+?)\s+(?:vs\.?|versus|compared\s+(?:with|to))\s+(?P<y>{_EDGE}+)", re.I),
)
# Words that open the clause, not a side: "so", "what's the actual".
_LEADING = re.compile(
    r"^(?:(?:so|ok|okay|and|but|hey|hi)\s+)*(?:what(?:'s| is| are)\s+(?:the\s+)?(?:actual\s+|real\s+|practical\s+)?)?",
    re.I,
)
_SENTENCE = re.compile(r"[^?.!]+[?.!]*")
MAX_SIDE_WORDS = 14


@dataclass(frozen=True)
class Comparison:
    first: str
    second: str
    rest: str  # the question's other sentences ("we resell a US vendor's software ...")

    def side_queries(self) -> tuple[str, str]:
        """What to search for each side: the side, with the rest of the question when the side is
        only a name ("importer" -> "importer; we resell a US vendor's AI software in the EU")."""
        return tuple(  # type: ignore[return-value]
            f"{side} {self.rest}".strip() if len(side.split()) <= 3 and self.rest else side
            for side in (self.first, self.second)
        )


def compared(question: str) -> Comparison | None:
    """The comparison `question` asks for, or None when it compares nothing."""
    for pattern in _PATTERNS:
        for m in pattern.finditer(question):
            first = _LEADING.sub("", m.group("x").strip()).strip()
            second = m.group("y").strip()
            if not _side(first) or not _side(second):
                continue
            others = [s.strip() for s in _SENTENCE.findall(question) if s.strip() and m.group(0) not in s]
            return Comparison(first, second, " ".join(others))
    return None


def _side(text: str) -> bool:
    return bool(content_terms(text)) and len(text.split()) <= MAX_SIDE_WORDS
