"""Deterministic follow-up handling: make a thread's follow-up searchable on its own.

A follow-up such as "What are they?" or "And for employment agencies?" carries no searchable content;
the thread's earlier user turns do. This module decides *whether* a question leans on the thread and,
if so, how to read it without an LLM:

* "What about employment agencies?" after "Does an employer have to publish the results of the bias
  audit?" asks the same question of someone else: the phrase of the earlier question closest in
  meaning to "employment agencies" ("an employer") is replaced ("Does an employment agencies have to
  publish the results of the bias audit?"). Closeness is the embedding model's; without one, or
  when nothing in the earlier question is like the new phrase ("And the penalties?"), the follow-up
  is searched together with the earlier question.
* A question that names its own subject is not a follow-up, even in a thread and even when short
  ("Who enforces the law?"), and neither is one that says it changes the subject ("Different
  question - ...") or one that names enough of its own to be about that, pronouns and all, unless
  it says it goes on ("... though", "is it still ...").

The full query rewriter (LLM and offline) builds on it.
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np

from core.text import QUESTION_FRAMING, STOPWORDS, asking_sentences, content_terms, framing_terms, tokens
from core.types import Turn

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")
# Words that point back into the conversation instead of naming what is asked about.
_ANAPHORA = {
    "it", "its", "they", "them", "their", "this", "that", "these", "those", "he", "she", "his", "her",
    "such", "same", "above", "former", "latter", "there", "one", "ones",
}
_CONTINUATIONS = (
    "and ", "what about", "how about", "also", "then ", "so ", "but ", "or ", "even ", "what if", "ok ", "okay ",
    "same ", "and?", "plus ",
)
_TOPIC_SWITCH = re.compile(
    r"^(?:(?:a\s+)?(?:different|new|separate|unrelated|another|other)\s+(?:question|topic|thing|issue)\b"
    r"|on a (?:different|separate) note\b|switching (?:topics?|gears)\b)",
    re.IGNORECASE,
)
# Questions this short are rarely self-contained ("What is the objective?") unless they name two things.
_SHORT_QUESTION_WORDS = 6
_MIN_OWN_TERMS = 2
# A question naming this many key terms of its own is about what it names even when it says "it" or
# "that" ("Does an employer have to keep the audit summary on its website after it stops using the
# tool?"): read as a follow-up, a new question in a thread was searched with the one before it and
# answered about that one. Below it, a pronoun leans on the thread ("Once it's done, do we have to
# send it to anyone?"). Chosen on our sets' questions asked second in a thread (docs/RESULTS.md).
_SELF_CONTAINED_TERMS = 7
# ... unless it says it goes on from the thread ("we're a 40-person startup though. is it still
# 'whichever is higher' for us?", "Great. Do we need ...").
_CONTINUING_WORDS = {"still", "though", "too", "also", "then", "either", "instead", "again", "anyway", "yet"}
# "that" opening a clause ("disclose *that* they are AI") and "they" after the plural it stands for
# ("must chatbots disclose that *they* are AI?") point inside the question, not back into the thread.
_CLAUSE_SUBJECTS = {
    "they", "it", "we", "you", "i", "he", "she", "the", "a", "an", "our", "their", "its", "this", "there",
    "these", "those", "every", "each", "all", "any", "no", "some",
}
_PLURAL_PRONOUNS = {"they", "them", "their"}
# ... but after these "that" is the thing asked about ("Is *that* something we do once, or every year?").
_THAT_ASKED_AFTER = {
    "is", "was", "are", "were", "does", "did", "do", "will", "would", "can", "could", "should", "has", "have",
    "and", "about", "of", "with", "for", "like",
}
_CONTINUING_TERMS = frozenset(content_terms(" ".join(_CONTINUING_WORDS)))
_CONTINUING_OPENING = re.compile(r"^(?:ok|okay|got it|great|thanks|ugh|right|cool|sure|hmm|nice)\b", re.IGNORECASE)
# "what about X", "how about X", "and for X", "same for X", "and X?": X asked in place of something.
_IN_PLACE_OF = re.compile(
    r"^(?:(?:ok|okay|so|and|but)[,\s]+)*(?:what|how)\s+about\s+(?P<a>[^?.;:,—–]+)"
    r"|^(?:(?:ok|okay|so)[,\s]+)*(?:and|same|the same|is it the same)\s+"
    r"(?:for|with|in the case of|if it'?s)\s+(?P<b>[^?.;:,—–]+)",
    re.IGNORECASE,
)
MIN_SUBSTITUTION_SIMILARITY = 0.6
MAX_SPAN_WORDS = 5
# A follow-up naming at most this many key terms, one of them new to the thread ("and the
# penalties?", "what's the carve-out?"), asks about that one thing; a longer one says enough in its
# own words for the search that leans toward it (core/pipeline.py). Chosen on the study parts'
# follow-ups and our own (docs/RESULTS.md, twelfth update).
TOPIC_FOLLOW_UP_TERMS = 3

Embed = Callable[[list[str]], np.ndarray]


def is_follow_up(question: str) -> bool:
    q = question.strip()
    words = [w.lower() for w in _WORD.findall(q)]
    if not words or _TOPIC_SWITCH.match(q):
        return False
    if q.lower().startswith(_CONTINUATIONS):
        return True
    if _points_back(words):
        continuing = bool(_CONTINUING_WORDS.intersection(words)) or _CONTINUING_OPENING.match(q) is not None
        return len(_own_terms(q)) < _SELF_CONTAINED_TERMS or continuing
    if _names_too_little(q):
        return True
    # A short question with a scene after or before it asks as the short question alone does: "what
    # are the conditions? we've been using the tool for about 2 years."
    asked = [s.strip() for s in asking_sentences(q)]
    return len(asked) == 1 and asked[0] != q and asked[0].endswith("?") and _names_too_little(asked[0])


def _names_too_little(text: str) -> bool:
    """Whether `text` is too short, and names too little of its own, to be asked on its own ("What
    are the methods?")."""
    return len(_WORD.findall(text)) <= _SHORT_QUESTION_WORDS and len(_own_terms(text)) < _MIN_OWN_TERMS


def _own_terms(text: str) -> set[str]:
    """The key terms `text` names itself; "though", "still": saying it goes on is not naming a
    subject ("for how long though?")."""
    return set(content_terms(text)) - QUESTION_FRAMING - _CONTINUING_TERMS


def _points_back(words: list[str]) -> bool:
    """Whether a word of the question (lowercased) refers to something outside it."""
    for i, word in enumerate(words):
        if word not in _ANAPHORA:
            continue
        following = words[i + 1] if i + 1 < len(words) else ""
        preceding = words[i - 1] if i > 0 else ""
        if word == "that" and following in _CLAUSE_SUBJECTS and preceding not in _THAT_ASKED_AFTER:
            continue
        if word in _PLURAL_PRONOUNS and any(_plural_noun(w) for w in words[:i]):
            continue
        return True
    return False


def _plural_noun(word: str) -> bool:
    return len(word) > 3 and word.endswith("s") and not word.endswith("ss") and bool(content_terms(word))


def standalone_query(question: str, history: Sequence[Turn], embed: Embed | None = None) -> str:
    """The text to search for: the question itself, the earlier question asked of something else,
    or the earlier question followed by the follow-up."""
    previous = [t.content.strip() for t in history if t.role == "user" and t.content.strip()]
    if not previous or not is_follow_up(question):
        return question
    earlier = previous[-1]
    if embed is not None:
        substituted = _asked_in_place(question, earlier, embed)
        if substituted is not None:
            return substituted
    return f"{earlier} {question}"


def _asked_in_place(question: str, earlier: str, embed: Embed) -> str | None:
    """The earlier question with its phrase most like the follow-up's "X" replaced by X (plus what
    the follow-up says after X), or None when the follow-up is not of that form or nothing is alike."""
    m = _IN_PLACE_OF.match(question.strip())
    if m is None:
        return None
    new = (m.group("a") or m.group("b") or "").strip()
    new_terms = set(content_terms(new))
    if not new_terms:
        return None
    spans = _phrases(earlier)
    if not spans:
        return None
    vectors = np.asarray(embed([new, *[earlier[a:b] for a, b in spans]]), dtype=np.float32)
    similarity = vectors[1:] @ vectors[0]
    best = int(np.argmax(similarity))
    if float(similarity[best]) < MIN_SUBSTITUTION_SIMILARITY:
        return None
    a, b = spans[best]
    if set(content_terms(earlier[a:b])) == new_terms:
        return None  # the same thing: nothing to replace
    rest = question.strip()[m.end() :].strip(" ,;:—–-?")
    substituted = f"{earlier[:a]}{new}{earlier[b:]}"
    return f"{substituted} {rest}" if rest else substituted


def _phrases(text: str) -> list[tuple[int, int]]:
    """Spans of 1 to MAX_SPAN_WORDS consecutive words that start and end on a content word."""
    words = [(m.start(), m.end(), m.group(0).lower()) for m in _WORD.finditer(text)]
    spans = []
    for i, (a, _, first) in enumerate(words):
        if first in STOPWORDS:
            continue
        for j in range(i, min(i + MAX_SPAN_WORDS, len(words))):
            if words[j][2] not in STOPWORDS and tokens(words[j][2]):
                spans.append((a, words[j][1]))
    return spans


def asking_part(question: str, history: Sequence[Turn]) -> str | None:
    """The part of `question` that asks, when it is a follow-up searched together with the question
    before it (`standalone_query`: "How long can a real-world test run? and when it wraps up, do we
    owe the regulator anything?" asks only what the second part does); None otherwise."""
    earlier = next((t.content.strip() for t in reversed(history) if t.role == "user" and t.content.strip()), "")
    if not earlier or not question.startswith(earlier):
        return None
    return question[len(earlier) :].strip() or None


def key_terms(text: str) -> frozenset[str]:
    """The stems of `text` that say what it is about ("And for SMEs?" -> {"sme"}; "What are they?",
    "for how long though?" -> none)."""
    return frozenset(content_terms(text)) - framing_terms(text) - _CONTINUING_TERMS


def new_topic(question: str, asking: str | None) -> frozenset[str]:
    """The key terms a short follow-up names that the question before it did not, when `question` is
    that follow-up searched together with the question before it and `asking` its own part
    (`asking_part`): "and the penalties?" after "who may do the bias audit?" -> {"penalti"}. Empty
    for any other question, and for a follow-up with more than TOPIC_FOLLOW_UP_TERMS key terms."""
    if not asking or asking == question or not question.endswith(asking):
        return frozenset()
    own = key_terms(asking)
    if len(own) > TOPIC_FOLLOW_UP_TERMS:
        return frozenset()
    return frozenset(own - set(content_terms(question[: len(question) - len(asking)])))
