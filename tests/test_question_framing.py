"""Which words of a question frame it and which say what it asks about."""
from __future__ import annotations

import pytest

from core.text import QUESTION_FRAMING, framing_terms, stem


@pytest.mark.parametrize(
    "question, asked_about",
    [
        # The law's own words are what these questions ask about.
        ("Am I entitled to some kind of explanation?", "explanation"),
        ("How long must a provider keep the technical documents?", "provider"),
        ("How long must a provider keep the technical documents?", "documents"),
        ("Which Member State authority supervises banks?", "State"),
    ],
)
def test_a_word_the_law_uses_is_asked_about_outside_a_framing_phrase(question, asked_about):
    assert stem(asked_about.lower()) in QUESTION_FRAMING  # a framing word in other questions
    assert stem(asked_about.lower()) not in framing_terms(question)


@pytest.mark.parametrize(
    "question, framing",
    [
        ("According to the document, what must an employer publish?", "document"),
        ("What is stated about the notice period?", "stated"),
        ("Can you explain what an AEDT is?", "explain"),
        ("Could you give an explanation of the bias audit?", "explanation"),
        ("As provided in the rules, who may audit?", "provided"),
    ],
)
def test_framing_words_frame_inside_their_phrases_and_always_when_only_framing(question, framing):
    assert stem(framing) in framing_terms(question)
