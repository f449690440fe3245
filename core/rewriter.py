"""Query rewriting: a thread's follow-up becomes a standalone question; a complex question gets sub-queries.

The offline rewriter is deterministic and costs well under a millisecond (a few when a follow-up is
read in place with the embedding model): it resolves follow-ups from earlier user turns
(core/followup.py), splits multi-part questions at their joints ("... and what
are ..."), and adds a version stripped of the question's framing ("I'm reviewing a policy and came
across ..."). The LLM rewriter (core/llm/rewriter.py) implements the same Protocol.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from core.followup import Embed, is_follow_up, standalone_query
from core.text import QUESTION_FRAMING, STOPWORDS, stem, tokens
from core.types import Turn


@dataclass(frozen=True)
class Rewrite:
    standalone: str  # the question, understandable without the thread (in English: what is searched)
    sub_queries: list[str] = field(default_factory=list)  # extra searches (never the standalone itself)
    model: str = "offline"
    language: str = "en"  # ISO 639-1 of the question as asked (an LLM rewriter translates the standalone)


class QueryRewriter(Protocol):
    def rewrite(self, question: str, history: Sequence[Turn], n_sub_queries: int) -> Rewrite: ...


# Where a question joins two asks: "..., and what are the penalties?", "... and how is it calculated".
_JOINT = re.compile(
    r"(?:[?;]\s+|,?\s+(?:and|or|also|as well as)\s+(?=(?:what|how|when|where|who|whom|which|why|whether|"
    r"does|do|is|are|can|must|should|if)\b))",
    re.IGNORECASE,
)
# Clauses that set a scene rather than ask: "I'm reviewing a policy document and came across ...".
_PREAMBLE = re.compile(
    r"^(?:i\s*(?:'m|am)\s+(?:trying|reviewing|an?|working|looking|writing|preparing)\b[^.?!]*[.?!]\s*)", re.IGNORECASE
)


class NoRewriter:
    """The question exactly as asked: the ablation baseline (no follow-up resolution, no sub-queries)."""

    def rewrite(self, question: str, history: Sequence[Turn], n_sub_queries: int) -> Rewrite:
        return Rewrite(standalone=question, model="none")


class OfflineRewriter:
    """Implements QueryRewriter without a language model. With `embed` (the embedding model), a
    follow-up asking the earlier question of something else is read in place (core/followup.py)."""

    def __init__(self, embed: Embed | None = None) -> None:
        self.embed = embed

    def rewrite(self, question: str, history: Sequence[Turn], n_sub_queries: int) -> Rewrite:
        standalone = standalone_query(question, history, self.embed)
        return Rewrite(standalone=standalone, sub_queries=self.sub_queries(standalone, n_sub_queries))

    def sub_queries(self, question: str, n: int) -> list[str]:
        if n <= 0:
            return []
        body = question.strip()
        scene = _PREAMBLE.match(body)
        # The scene-setting clause is not searched on its own, but it may name the subject.
        subject = _focus(scene.group(0)) if scene else ""
        parts = [p.strip(" ,.;") for p in _JOINT.split(body[scene.end() :] if scene else body)]
        parts = [p for p in parts if len(p.split()) >= 3]
        candidates: list[str] = []
        if len(parts) >= 2 or scene:
            previous = subject
            for part in parts:
                # "... and how is it calculated?" needs the subject of the part before it.
                if is_follow_up(part) and previous:
                    part = f"{previous} {part}"
                candidates.append(part)
                previous = _focus(part)
        candidates.append(_focus(question))
        out: list[str] = []
        seen = {_key(question)}
        for c in candidates:
            if c and _key(c) not in seen:
                seen.add(_key(c))
                out.append(c)
        return out[:n]


def _focus(text: str) -> str:
    """The question's content words in order, without its framing ("can you explain ...")."""
    words = [w for w in tokens(text) if w not in STOPWORDS and stem(w) not in QUESTION_FRAMING]
    return " ".join(words)


def _key(text: str) -> str:
    return " ".join(tokens(text))
