"""An annex a provision hands its content to (core/annex_content.py) follows that provision in the
contexts, and the offline answer quotes it after the sentence that hands it over (core/extractive.py)."""
from __future__ import annotations

import pytest

from core.annex_content import ANNEX_WORDS, HandedTo, annexes_handed_to, asks_for_content, with_annex_content
from core.extractive import ExtractiveGenerator
from core.termstats import TermStats
from core.thread_units import unit_of_label
from core.types import ScoredChunk
from hypa_testkit.toy import make_chunk

DECLARATION = make_chunk(
    "Toy Act Art. 7(2)",
    "2. The widget declaration shall contain the information set out in Annex V. It shall be kept up to date.",
)
KEEPING = make_chunk("Toy Act Art. 7(1)", "1. The maker shall keep the widget declaration for ten years.")
CATEGORY = make_chunk("Toy Act Art. 6(2)", "2. Widget systems referred to in Annex III shall be considered risky.")
ANNEX_V = [
    make_chunk("Toy Act Annex V(1)", "1. The name and address of the widget maker;"),
    make_chunk("Toy Act Annex V(2)", "2. The serial number of the widget and its colour;"),
]
ANNEX_III = make_chunk("Toy Act Annex III(1)", "1. Widgets for children.")
COLLECTION = [KEEPING, DECLARATION, CATEGORY, *ANNEX_V, ANNEX_III]
UNITS = [unit_of_label(c.label) for c in COLLECTION]


def test_a_provision_hands_content_to_an_annex_but_naming_a_listed_category_hands_nothing():
    assert annexes_handed_to(DECLARATION.text) == [HandedTo("annex:V")]
    assert annexes_handed_to("an offence referred to in Annex II and the criteria specified in Annex XIII") == [
        HandedTo("annex:II"),
        HandedTo("annex:XIII"),
    ]
    assert annexes_handed_to("the data listed in Section C of Annex VIII") == [HandedTo("annex:VIII", "C")]
    assert annexes_handed_to(CATEGORY.text) == []  # "systems referred to in Annex III" names what it lists


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("What actually has to go into the widget declaration?", True),
        ("what's supposed to be written on the declaration?", True),
        ("For which crimes may it be used? Is there an actual list?", True),
        ("What information must the declaration contain?", True),
        ("How long do we keep the widget declaration?", False),
        ("Who has to sign the declaration?", False),
        ("what about models we already put on the market before that date?", False),
    ],
)
def test_a_question_asking_what_something_holds(question, asks):
    assert asks_for_content(question) is asks


def test_the_annex_follows_the_first_provision_that_hands_content_to_it_in_the_annexs_order():
    ranked = [ScoredChunk(KEEPING, 0.9), ScoredChunk(DECLARATION, 0.8), ScoredChunk(ANNEX_V[1], 0.3)]
    order = with_annex_content(ranked, COLLECTION, UNITS)
    assert [sc.chunk.label for sc in order] == [
        "Toy Act Art. 7(1)",
        "Toy Act Art. 7(2)",
        "Toy Act Annex V(1)",
        "Toy Act Annex V(2)",
    ]
    assert [sc.score for sc in order] == sorted((sc.score for sc in order), reverse=True)  # still falling


def test_a_category_reference_or_a_provision_far_down_moves_nothing():
    ranked = [ScoredChunk(CATEGORY, 0.9), ScoredChunk(KEEPING, 0.8)]
    assert with_annex_content(ranked, COLLECTION, UNITS) == ranked
    far = [ScoredChunk(KEEPING, 0.9)] * 1 + [ScoredChunk(make_chunk(f"Toy Act Art. {n}", "text"), 0.5) for n in (1, 2)]
    far.append(ScoredChunk(DECLARATION, 0.1))  # fourth: not among the provisions read for a hand-over
    assert [sc.chunk.label for sc in with_annex_content(far, COLLECTION, UNITS)] == [sc.chunk.label for sc in far]


def test_a_section_of_an_annex_follows_without_the_other_sections():
    sections = [make_chunk(f"Toy Act Annex VIII, Section {x}(1)", f"1. Item of section {x};") for x in "ABC"]
    register = make_chunk("Toy Act Art. 9(3)", "3. The data listed in Section C of Annex VIII shall be entered.")
    collection = [register, *sections]
    ranked = [ScoredChunk(register, 1.0), ScoredChunk(sections[2], 0.1)]
    order = with_annex_content(ranked, collection, [unit_of_label(c.label) for c in collection])
    assert [sc.chunk.label for sc in order] == ["Toy Act Art. 9(3)", "Toy Act Annex VIII, Section C(1)"]
    # an annex (or section) the ranking found nowhere is not what the question is about
    assert with_annex_content(ranked[:1], collection, [unit_of_label(c.label) for c in collection]) == ranked[:1]


def test_a_long_annex_follows_only_as_far_as_its_word_budget():
    long_annex = [make_chunk(f"Toy Act Annex V({n})", "word " * (ANNEX_WORDS // 2)) for n in range(1, 5)]
    collection = [DECLARATION, *long_annex]
    ranked = [ScoredChunk(DECLARATION, 1.0), ScoredChunk(long_annex[3], 0.1)]
    order = with_annex_content(ranked, collection, [unit_of_label(c.label) for c in collection])
    labels = [sc.chunk.label for sc in order]
    assert labels == ["Toy Act Art. 7(2)", "Toy Act Annex V(1)", "Toy Act Annex V(2)", "Toy Act Annex V(4)"]


def test_the_offline_answer_quotes_the_annex_after_the_sentence_that_hands_it_over():
    chunks = [DECLARATION, *ANNEX_V, KEEPING]
    stats = TermStats.from_texts(c.text for c in chunks)
    answer = ExtractiveGenerator(lambda c: stats).generate(
        "What information must the widget declaration contain?", [ScoredChunk(c, 1.0 / (i + 1)) for i, c in enumerate(chunks)]
    )
    assert not answer.refused
    text = answer.text
    assert text.index("set out in Annex V") < text.index("name and address of the widget maker") < text.index("serial number")
