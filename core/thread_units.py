"""The units of law (an article, an annex, a section) the thread's last answer cited.

A follow-up usually asks on about what that answer cited: "ok, and at what point in the conversation
does that have to be shown?" after an answer under Art. 50(1) is answered by Art. 50(5); "how long
do we get?" after one that names Art. 111(3) asks about Art. 111(3) itself. Searched by its words, together
with the question before it, the follow-up often reaches other articles that share those words
("human", "shown"), so the ranking leans toward the chunks of the cited units (core/pipeline.py).

A unit is named the same way in a chunk's citation label ("EU AI Act Art. 50(1)", "6 RCNY §
5-304(c)") and in an answer's text ("Under EU AI Act Art. 50(1) …", "(Art. 50(1))", "Article 50",
"Annex III, point 4", "§ 20-871(b)(3)").
"""
from __future__ import annotations

import re
from typing import Sequence

from core.types import Turn

_UNIT = re.compile(
    r"\bArt(?:icle)?s?\.?\s*(?P<article>\d{1,3})(?![\d-])"
    r"|\bAnnex\s+(?P<annex>[IVXL]{1,5})\b"
    r"|§+\s*(?P<section>\d{1,2}-\d{3})(?!\d)",
    re.IGNORECASE,
)


def units_named(text: str) -> frozenset[str]:
    """Every unit `text` names, as "art:50", "annex:III" or "sec:5-304"."""
    found = set()
    for m in _UNIT.finditer(text):
        if m.group("article"):
            found.add(f"art:{int(m.group('article'))}")
        elif m.group("annex"):
            found.add(f"annex:{m.group('annex').upper()}")
        else:
            found.add(f"sec:{m.group('section')}")
    return frozenset(found)


def unit_of_label(label: str) -> str | None:
    """The unit a chunk's citation label names first ("EU AI Act Art. 50(1)" -> "art:50"), None for
    one that names none (a recital, the preamble, a local law's own § 2)."""
    m = _UNIT.search(label)
    if m is None:
        return None
    return next(iter(units_named(m.group(0))))


def last_answer_units(history: Sequence[Turn]) -> frozenset[str]:
    """The units the thread's last answer names; none without one."""
    for turn in reversed(history):
        if turn.role == "assistant":
            return units_named(turn.content)
    return frozenset()
