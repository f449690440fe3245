"""What kind of statement a question asks for, and what kind a passage makes.

"Who may conduct a bias audit?" is answered by the sentence that says by whom ("an impartial
evaluation by an independent auditor"), "What must a bias audit calculate?" by the lead-in of a list
("a bias audit must, at a minimum: (1) Calculate the selection rate ..."), "What is an AEDT?" by a
definition. These labels, and whether a passage is a definition or a list, are features of the learned
ranking and sentence choice (core/ranking.py, core/extractive.py), which weigh them.
"""
from __future__ import annotations

import re

from core.text import content_terms
from core.types import Chunk

_CLAUSE_START = r"(?:^|[.?!;:,(—–-]\s*|\b(?:and|so|but|ok|okay)\s+)"
_ACTOR = re.compile(
    _CLAUSE_START + r"(?:who(?:m|se)?\b|which\s+(?:\w+\s+)?(?:authority|authorities|body|bodies|agency|person|"
    r"persons|entity|party|regulator|court|organi[sz]ation|office|official|role)\b|what\s+(?:\w+\s+)?"
    r"(?:authority|body|agency|regulator|court)\b)",
    re.IGNORECASE,
)
_LIST = re.compile(
    r"\bwhat\s+(?:\w+\s+){0,5}?(?:include|includes|contain|contains|cover|covers|calculate|calculates|list|"
    r"consist|report|disclose|publish|provide|document|show|state)\b"
    r"|\bwhat\s+(?:information|details|data|documents|documentation|elements|steps|things|items|measures|calculations)\b",
    re.IGNORECASE,
)
_KINDS = re.compile(r"\b(?:what|which)\s+(?:kinds?|types?|sorts?|categories)\s+of\b", re.IGNORECASE)
_DEFINITION = re.compile(
    r"\b(?:define|definition of|meaning of|what is meant by|what does\s.{1,60}\bmean\b|what counts as|"
    r"what qualifies as)\b|^\W*what(?:'s| is| are)\s+(?:an?\s+|the\s+)?[^?,;\s]+(?:\s+[^?,;\s]+){0,3}\s*\??\s*$",
    re.IGNORECASE,
)
# A sentence that defines: “X” means ..., the term X means ..., X is defined as ...
_DEFINES = re.compile(r"\bmeans\b|\bthe term\b|\bis defined as\b|\brefers to\b", re.IGNORECASE)
_LIST_LEAD = re.compile(r":\s*$|\bthe following\b|\bat a minimum\b", re.IGNORECASE)


def asks_actor(question: str) -> bool:
    return _ACTOR.search(question) is not None


def asks_list(question: str) -> bool:
    return _LIST.search(question) is not None


def asks_kinds(question: str) -> bool:
    """"For what kinds of crimes …?", "which types of data …?": the answer is a list of them."""
    return _KINDS.search(question) is not None


def asks_definition(question: str) -> bool:
    return _DEFINITION.search(question.strip()) is not None


def defines(text: str) -> bool:
    return _DEFINES.search(text) is not None


def leads_a_list(text: str) -> bool:
    return _LIST_LEAD.search(text.rstrip()) is not None


# A defined term: “deployer” means ..., ‘AI system’ means ..., "Selection rate" means ...
_DEFINED = re.compile(r"[“\"‘']([^”\"’']{2,80})[”\"’']\s+(?:or\s+[“\"‘'][^”\"’']{1,40}[”\"’']\s+)?means\b")


def defined_names(text: str) -> list[str]:
    """The terms `text` defines, as written (“X” means ...)."""
    return _DEFINED.findall(text)


def defined_terms(chunk: Chunk) -> frozenset[str]:
    """The stemmed terms a definition chunk defines (from its heading "Definitions — X; Y" and from
    “X” means ... in its text)."""
    names: list[str] = []
    if "—" in chunk.heading:
        names += [n for n in chunk.heading.split("—", 1)[1].split(";")]
    names += defined_names(chunk.text)
    return frozenset(" ".join(content_terms(n)) for n in names if content_terms(n))
