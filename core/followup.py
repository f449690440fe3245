"""Deterministic follow-up handling: make a thread's follow-up searchable on its own.

A follow-up such as "What are they?" or "And for employment agencies?" carries no searchable content;
the thread's earlier user turns do. This module only decides *whether* a question leans on the thread
and, if so, prepends the most recent user turn. The full query rewriter (LLM and offline) builds on it.
"""
from __future__ import annotations

import re
from typing import Sequence

from core.types import Turn

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")
# Words that point back into the conversation instead of naming what is asked about.
_ANAPHORA = {
    "it", "its", "they", "them", "their", "this", "that", "these", "those", "he", "she", "his", "her",
    "such", "same", "above", "former", "latter", "there", "one", "ones",
}
_CONTINUATIONS = ("and ", "what about", "how about", "also", "then ", "so ", "but ", "or ")
# Questions this short are rarely self-contained ("What is the objective?").
_SHORT_QUESTION_WORDS = 6


def is_follow_up(question: str) -> bool:
    words = [w.lower() for w in _WORD.findall(question)]
    if not words:
        return False
    if question.strip().lower().startswith(_CONTINUATIONS):
        return True
    return len(words) <= _SHORT_QUESTION_WORDS or any(w in _ANAPHORA for w in words)


def standalone_query(question: str, history: Sequence[Turn]) -> str:
    """The text to search for: the question itself, or the last user turn + the follow-up."""
    previous = [t.content.strip() for t in history if t.role == "user" and t.content.strip()]
    if not previous or not is_follow_up(question):
        return question
    return f"{previous[-1]} {question}"
