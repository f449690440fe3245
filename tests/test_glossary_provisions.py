"""The provision a glossary's words for a user's phrase point to is brought into the contexts
(core/glossary_provisions.py) without taking the lead from what the ranking put first."""
from __future__ import annotations

from core.glossary_provisions import STATING_PLACE, folded, stating, with_stating
from core.types import ScoredChunk
from hypa_testkit.toy import make_chunk

RULES = make_chunk("Toy Act Recital 12", "It should not cover systems based on the rules defined\nsolely by persons.")
DUTY = make_chunk("Toy Act Art. 5", "A seller shall notify buyers.")
DUTY_COPY = make_chunk("Toy Act Art. 5", "A seller shall notify buyers.", doc_id="codified")
OTHERS = [make_chunk(f"Toy Act Art. {n}", f"Text {n} about widgets.") for n in range(10, 20)]
CHUNKS = [RULES, DUTY, DUTY_COPY, *OTHERS]
TEXTS = [folded(c.text) for c in CHUNKS]


def test_only_law_words_a_single_provision_states_point_to_it():
    assert stating(["rules defined solely by persons"], CHUNKS, TEXTS) == [RULES]  # across a line break
    assert stating(["seller shall notify"], CHUNKS, TEXTS) == [DUTY, DUTY_COPY]  # two copies of one provision
    assert stating(["about widgets"], CHUNKS, TEXTS) == []  # ten provisions say it
    assert stating(["nowhere said"], CHUNKS, TEXTS) == []


def test_a_stating_provision_ranked_low_moves_up_to_its_place_and_the_lead_stays():
    ranked = [ScoredChunk(c, 1.0 - i / 100) for i, c in enumerate([*OTHERS, RULES])]
    order = with_stating(ranked, [RULES])
    assert order[0].chunk == OTHERS[0]
    assert order[STATING_PLACE].chunk == RULES
    assert [sc.chunk for sc in order if sc.chunk != RULES] == OTHERS  # the rest keeps its order
    assert [sc.score for sc in order] == [sc.score for sc in ranked]  # scores stay those of the places


def test_a_stating_provision_already_near_the_top_or_an_unranked_one():
    ranked = [ScoredChunk(c, 1.0) for c in [OTHERS[0], RULES, *OTHERS[1:]]]
    assert with_stating(ranked, [RULES]) == ranked
    unranked = with_stating([ScoredChunk(c, 1.0) for c in OTHERS], [RULES])
    assert unranked[STATING_PLACE].chunk == RULES and len(unranked) == len(OTHERS) + 1
    assert with_stating([], [RULES]) == []
