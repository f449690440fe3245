"""A cheap, deterministic question-type label for feedback reports (no model, microseconds).

Rules, first match wins (docs/FEEDBACK.md lists them with examples):

1. ``follow-up``  - asked inside a thread with earlier turns and leaning on them ("What about agencies?"),
   by the same test the rewriter uses (core/followup.py);
2. ``compare``    - asks for a difference or a comparison ("How does X differ from Y?", "X vs Y");
3. ``multi-part`` - two or more questions in one (two question marks, or "..., and what/how ...");
4. ``definition`` - asks what a term means: "Define ...", "What does ... mean?", or "What is/are" + at
   most four words ("What is an AEDT?", not "What is the penalty for a first violation?");
5. ``yes-no``     - a question starting with an auxiliary verb ("Do I need ...?", "Is it ...?");
6. ``other``      - everything else (how/when/who questions, instructions, statements).
"""
from __future__ import annotations

import re
from typing import Literal

from core.followup import is_follow_up

QuestionType = Literal["follow-up", "compare", "multi-part", "definition", "yes-no", "other"]
QUESTION_TYPES: tuple[QuestionType, ...] = ("follow-up", "compare", "multi-part", "definition", "yes-no", "other")

_COMPARE = re.compile(
    r"\b(?:compare[sd]?|comparison|comparing|differ(?:s|ence|ences|ent|ently)?|distinguish\w*|versus|vs\.?"
    r"|as opposed to|contrast\w*|same as|similar to)\b",
    re.IGNORECASE,
)
# "..., and what are the penalties?": a second ask joined to the first.
_SECOND_ASK = re.compile(
    r"(?:,|;|\band\b|\balso\b|\bas well as\b)\s+(?:also\s+)?(?:what|how|when|where|who|which|why|whether|does|do|is|"
    r"are|can|must|should)\b",
    re.IGNORECASE,
)
_DEFINITION = re.compile(
    r"^(?:define\b|definition of\b|(?:what is the )?meaning of\b|what is meant by\b|what does .{1,80}\bmean\b"
    r"|what(?:'s| is| are) (?:an? |the )?[^?,;\s]+(?:\s+[^?,;\s]+){0,3}\s*\??$)",
    re.IGNORECASE,
)
_AUXILIARIES = {
    "am", "is", "are", "was", "were", "do", "does", "did", "can", "could", "must", "may", "might", "shall",
    "should", "will", "would", "has", "have", "had", "need",
}
_SENTENCE_END = re.compile(r"[.?!]")


def classify_question(question: str, *, in_thread: bool = False) -> QuestionType:
    q = " ".join(question.split())
    if not q:
        return "other"
    if in_thread and is_follow_up(q):
        return "follow-up"
    if _COMPARE.search(q):
        return "compare"
    if q.count("?") >= 2 or _SECOND_ASK.search(q):
        return "multi-part"
    if _DEFINITION.match(q):
        return "definition"
    # The asking sentence may follow a scene-setting one: "I run a staffing agency. Do I need ...?"
    asks = _question_sentences(q) or [q]
    if any(s.split()[0].lower().strip("¿¡\"'") in _AUXILIARIES for s in asks if s.split()):
        return "yes-no"
    return "other"


def _question_sentences(text: str) -> list[str]:
    """The sentences that end with "?", found in one pass.

    (A `[^.?!]+[?]` findall rescans the rest of the text from every position when no "?" follows:
    quadratic, 8 s for a 40,000-character message without punctuation.)
    """
    asks, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        if end.group() == "?" and end.start() > start:
            asks.append(text[start:end.end()])
        start = end.end()
    return asks
