"""Comparison questions: what is compared, and each side's best provision in the contexts."""
from __future__ import annotations

from core.comparison import compared
from core.pipeline import AnswerPipeline
from core.types import RetrievalParams, ScoredChunk
from hypa_testkit.toy import make_chunk
from storage.embedder import HashingEmbedder


def test_the_two_sides_of_a_comparison():
    c = compared("importer vs distributor, what's the actual difference? we resell US software in the EU")
    assert (c.first, c.second) == ("importer", "distributor")
    # a side that is only a name is searched with the question's other sentences
    assert c.side_queries() == ("importer we resell US software in the EU", "distributor we resell US software in the EU")
    c = compared("What's the difference between the AI Office and the European AI Board?")
    assert (c.first, c.second) == ("the AI Office", "the European AI Board")
    c = compared("How do fines for unlabelled deepfakes compare with fines for a banned practice?")
    assert (c.first, c.second) == ("fines for unlabelled deepfakes", "fines for a banned practice")
    c = compared("Sorting out our plan. what has to go on the careers page versus what goes in the notice?")
    assert c.side_queries() == ("what has to go on the careers page", "what goes in the notice")
    # what follows the second of two names sets the scene for both, and is searched with each
    c = compared("whats the difference between historical data and test data for the bias audit?")
    assert (c.first, c.second, c.rest) == ("historical data", "test data", "for the bias audit")
    assert c.between_names()
    c = compared("difference between the notice for candidates and the notice for employees?")
    assert (c.first, c.second) == ("the notice for candidates", "the notice for employees")
    # "X different from Y", "the same for X and for Y", and a scene said before the sides ("do the
    # ways ... differ for X vs Y"): the scene is searched with each side, not counted as one's words
    c = compared("How's notifying outside applicants different from notifying employees up for promotion? Same options?")
    assert (c.first, c.second) == ("How's notifying outside applicants", "notifying employees up for promotion")
    assert c.rest == "Same options?"
    c = compared("are the ways to give the notice the same for outside job candidates and for current employees up for it?")
    assert (c.first, c.second) == ("outside job candidates", "current employees up for it")
    assert c.scene == "are the ways to give the notice"
    c = compared("Is the conformity assessment route different for a remote biometric ID system vs a CV-screening tool?")
    assert (c.first, c.second) == ("a remote biometric ID system", "a CV-screening tool")
    assert c.side_queries() == (
        "a remote biometric ID system Is the conformity assessment route different for",
        "a CV-screening tool Is the conformity assessment route different for",
    )
    c = compared("Do we notify current employees up for promotion the same way we notify outside applicants?")
    assert (c.first, c.second) == ("Do we notify current employees up for promotion", "we notify outside applicants")
    assert compared("Can we notify staff the same way as candidates?").second == "candidates"
    assert compared("Is the fine calculated the same way for SMEs?") is None  # one side only
    assert compared("Is the fine the same for everyone?") is None
    assert compared("What is the penalty for a first violation?") is None
    assert compared("What's the difference?") is None
    # a long message is read once, not tried at every word
    assert compared("word " * 800) is None
    assert compared(("word " * 700) + "importer vs distributor?") is None  # a 700-word side is no side
    assert compared(("word. " * 700) + "importer vs distributor?").first == "importer"


def test_each_side_of_a_comparison_gets_its_best_provision_right_after_the_best_overall():
    names = ("importer", "distributor", "provider", "deployer")
    chunks = {name: make_chunk(name, f"The {name} shall keep records.") for name in names}
    params = RetrievalParams(top_k=4, fusion="rankedFusion", alpha=0.5)
    pipeline = AnswerPipeline(
        index=None,  # type: ignore[arg-type]  # not searched: the ranking is stubbed below
        generator=None,  # type: ignore[arg-type]
        params=params,
        default_collection="toy",
        count_tokens=lambda text: len(text.split()),
        embed_queries=HashingEmbedder(dim=64).embed_queries,
    )

    def rank(plan, collection, query_vector, piece_vectors, params):  # each side finds its own name first
        named = [name for name in chunks if name in plan.text]
        return [ScoredChunk(chunks[n], 1.0) for n in named] + [ScoredChunk(chunks["provider"], 0.5)]

    pipeline._rank_provisions = rank  # type: ignore[method-assign]
    ranked = (("provider", 0.9), ("deployer", 0.8), ("distributor", 0.3), ("importer", 0.2))
    overall = [ScoredChunk(chunks[n], s) for n, s in ranked]
    merged = pipeline._with_each_side(compared("importer vs distributor?"), overall, "toy", params)
    assert [sc.chunk.label for sc in merged] == ["provider", "importer", "distributor", "deployer"]
    # the scores are the places' scores: still falling with the rank
    assert [sc.score for sc in merged] == [0.9, 0.8, 0.3, 0.2]


def test_two_names_the_collection_defines_are_compared_by_their_definitions():
    """"provider vs deployer": the side rankings found duties naming providers (Art. 25(4)) before
    the definition; the definitions tell the two apart."""
    from core.ranking import FeatureBuilder
    from core.segments import SegmentIndex

    importer = make_chunk("Toy Act Art. 3(1)", "(1) ‘importer’ means a seller that brings in widgets;", heading="Definitions")
    distributor = make_chunk("Toy Act Art. 3(2)", "(2) ‘distributor’ means a seller that resells widgets;", heading="Definitions")
    duty = make_chunk("Toy Act Art. 9", "The importer shall keep records of widgets.", heading="Records")
    other = make_chunk("Toy Act Art. 10", "Fines are up to EUR 500.", heading="Penalties")
    embedder = HashingEmbedder(dim=64)

    class Vectors:
        def get(self, texts):
            return embedder.embed_passages(list(texts))

    features = FeatureBuilder(SegmentIndex([importer, distributor, duty, other], Vectors()))
    assert features.defining("an importer") is importer and features.defining("the maker") is None

    class Provisions:
        def features(self, collection):
            return features

    params = RetrievalParams(top_k=4, fusion="rankedFusion", alpha=0.5)
    pipeline = AnswerPipeline(
        index=None,  # type: ignore[arg-type]  # not searched
        generator=None,  # type: ignore[arg-type]
        params=params,
        default_collection="toy",
        count_tokens=lambda text: len(text.split()),
        embed_queries=embedder.embed_queries,
        provisions=Provisions(),  # type: ignore[arg-type]
    )
    overall = [ScoredChunk(distributor, 0.9), ScoredChunk(duty, 0.8), ScoredChunk(other, 0.3), ScoredChunk(importer, 0.2)]
    merged = pipeline._with_each_side(compared("importer vs distributor, what's the difference?"), overall, "toy", params)
    assert [sc.chunk.label for sc in merged][:2] == ["Toy Act Art. 3(2)", "Toy Act Art. 3(1)"]
    assert [sc.score for sc in merged] == [0.9, 0.8, 0.3, 0.2]
