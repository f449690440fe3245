"""A follow-up's ranking leans toward the units of law the thread's last answer cited."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from core.pipeline import THREAD_UNIT_WEIGHT, AnswerPipeline
from core.query import NormalisedQuestion, QueryPlan
from core.thread_units import last_answer_units, unit_of_label, units_named
from core.types import RetrievalParams, ScoredChunk, Turn
from hypa_testkit.toy import make_chunk
from storage.embedder import HashingEmbedder


def test_units_are_named_alike_in_labels_and_in_answers():
    assert unit_of_label("EU AI Act Art. 50(1)") == "art:50"
    assert unit_of_label("EU AI Act Art. 26(2)–(3)") == "art:26"
    assert unit_of_label("EU AI Act Annex III(4)") == "annex:III"
    assert unit_of_label("6 RCNY § 5-304(c)") == "sec:5-304"
    assert unit_of_label("Admin. Code § 20-871(b)") == "sec:20-871"
    assert unit_of_label("EU AI Act Recital (132)") is None
    assert unit_of_label("Int. No. 1894-A § 2") is None  # a local law's own section names no unit of the code
    said = "Under EU AI Act Art. 50(1) (Transparency …): “… referred to in Article 6(2) …” and Annex III, point 4."
    assert units_named(said) == {"art:50", "art:6", "annex:III"}
    assert units_named("(§ 20-871(b)(3); 6 RCNY § 5-304(d)(2))") == {"sec:20-871", "sec:5-304"}
    assert units_named("Regulation (EU) 2016/679 applies; see 29 C.F.R. § 1607.4.") == frozenset()


def test_the_last_answer_of_the_thread_is_read():
    history = [
        Turn("user", "Does our chatbot need to say it's a bot?"),
        Turn("assistant", "Yes, under Art. 50(1)."),
        Turn("user", "and deepfakes?"),
        Turn("assistant", "Those are labelled under Art. 50(4)."),
    ]
    assert last_answer_units(history) == {"art:50"}
    assert last_answer_units(history[:1]) == frozenset()
    assert last_answer_units([]) == frozenset()


def _ranking_pipeline(chunks, recorded):
    """A pipeline whose provision ranker records the prior it is given and ranks by it."""

    def rank(plan, collection, features, query_vector, piece_vectors, limit, prior=None):
        recorded.append(prior)
        scores = prior if prior is not None else np.zeros(len(chunks))
        return [ScoredChunk(chunks[i], float(scores[i])) for i in np.argsort(-scores, kind="stable")[:limit]]

    features = SimpleNamespace(segments=SimpleNamespace(chunks=chunks))
    provisions = SimpleNamespace(
        ranker=SimpleNamespace(rank=rank), features=lambda collection: features, precedents=None, lexicon=None
    )
    pipeline = AnswerPipeline(
        index=None,  # type: ignore[arg-type]  # not searched: the provision ranking is
        generator=None,  # type: ignore[arg-type]
        params=RetrievalParams(top_k=3, fusion="rankedFusion", alpha=0.5, ranking="provisions"),
        default_collection="toy",
        count_tokens=lambda text: len(text.split()),
        embed_queries=HashingEmbedder(dim=64).embed_queries,
        provisions=provisions,  # type: ignore[arg-type]
    )
    pipeline._plan = lambda standalone, collection: QueryPlan.of(NormalisedQuestion(standalone))  # type: ignore[method-assign]
    return pipeline


def test_a_follow_up_leans_toward_the_units_the_last_answer_cited_and_a_new_question_does_not():
    chunks = [
        make_chunk("Toy Act Art. 5(1)", "Sellers shall not sell shown widgets."),
        make_chunk("Toy Act Art. 50(1)", "Sellers shall tell buyers that a bot is a bot."),
        make_chunk("Toy Act Art. 50(5)", "The information shall be given at the latest at the first interaction."),
    ]
    recorded: list = []
    pipeline = _ranking_pipeline(chunks, recorded)
    history = [Turn("user", "Does our shop bot need to say it is a bot?"), Turn("assistant", "Yes, under Toy Act Art. 50(1).")]
    found = pipeline.retrieve("ok, and at what point does that have to be shown?", history)
    assert np.allclose(recorded[0], [0.0, THREAD_UNIT_WEIGHT, THREAD_UNIT_WEIGHT])
    assert [sc.chunk.label for sc in found.contexts][:2] == ["Toy Act Art. 50(1)", "Toy Act Art. 50(5)"]
    recorded.clear()
    pipeline.retrieve("What may sellers never sell under the toy act at all?", history)  # no follow-up
    assert recorded[0] is None
    recorded.clear()
    pipeline.retrieve("and what is shown?", [Turn("user", "Does our shop bot need to say it is a bot?")])
    assert recorded[0] is None  # no answer to lean on
