"""The extractive generator quotes only retrieved text, cites it, and abstains when it must."""
from __future__ import annotations

import re

from tests.helpers import scored, toy_generator


def _contexts_by_id():
    return {sc.chunk.id: sc.chunk.text for sc in scored()}


def test_answer_quotes_the_rule_and_cites_it():
    answer = toy_generator().generate("How many business days before selling must a seller notify buyers?", scored())
    assert not answer.refused
    assert "ten business days" in answer.text
    assert any(c.label == "Toy Code § 1-102(a)" for c in answer.citations)
    assert answer.text.rstrip().endswith("]")


def test_every_quote_is_verbatim_in_its_chunk_and_answer_only_contains_quotes_and_their_frames():
    texts = _contexts_by_id()
    for q in (
        "What is a widget audit?",
        "What is the civil penalty for a subsequent violation?",
        "How can notice be given?",
    ):
        answer = toy_generator().generate(q, scored())
        assert not answer.refused, q
        assert answer.citations
        rest = answer.text
        for c in answer.citations:
            assert c.quote in texts[c.chunk_id]
            rest = rest.replace(" ".join(c.quote.split()), "")
        # What is left is only the frames naming each provision and the citation markers: nothing
        # outside the law's text is said about it.
        frames = [line for line in rest.splitlines() if line]
        assert frames and all(re.fullmatch(r"(?:And u|U)nder Toy Code § [\d()a-z-]+(?: \([^)]*\))?: “(?: … )*” \[\d\]", f) for f in frames), frames


def test_citation_numbers_follow_first_use():
    answer = toy_generator().generate("What is the civil penalty and how many days notice before selling?", scored())
    numbers = [c.n for c in answer.citations]
    assert numbers[0] == 1 and sorted(set(numbers)) == list(range(1, max(numbers) + 1))


def test_question_the_provisions_do_not_address_is_refused_without_citations():
    answer = toy_generator().generate("What colour must the packaging of a gadget be in Norway?", scored())
    assert answer.refused
    assert answer.citations == []
    assert "don't address" in answer.text


def test_no_contexts_means_refusal():
    answer = toy_generator().generate("What is a widget audit?", [])
    assert answer.refused and answer.citations == []
