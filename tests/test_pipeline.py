"""Pipeline: question validation, follow-up handling, record shape."""
from __future__ import annotations

from dataclasses import replace

from core.extractive import ExtractiveGenerator
from core.followup import is_follow_up, new_topic, standalone_query
from core.pipeline import AnswerPipeline, QuestionLimits, drop_near_duplicates
from core.query import NormalisedQuestion, QueryPlan
from core.termstats import TermStats
from core.types import RetrievalParams, ScoredChunk, Turn
from hypa_testkit.toy import TOY_CHUNKS, make_chunk, scored


class RecordingIndex:
    """A ChunkIndex stand-in that returns the toy chunks and records the queries it was given."""

    def __init__(self):
        self.queries: list[str] = []

    def hybrid_search(self, query, *, collection, limit, fusion="rankedFusion", alpha=0.5, vector=None):
        self.queries.append(query)
        return scored()[:limit]


def _pipeline(index=None, max_chars=4000) -> AnswerPipeline:
    stats = TermStats.from_texts(c.text for c in TOY_CHUNKS)
    return AnswerPipeline(
        index or RecordingIndex(),
        ExtractiveGenerator(lambda c: stats),
        RetrievalParams(top_k=3, fusion="rankedFusion", alpha=0.5),
        default_collection="toy",
        count_tokens=lambda t: len(t.split()),
        limits=QuestionLimits(max_chars=max_chars),
    )


def test_answer_record_has_the_documented_fields():
    record = _pipeline().answer("What is the civil penalty for a first violation?").to_record()
    assert {"answer", "refused", "citations", "contexts", "queries", "complexity", "params", "usage", "timings_ms"} <= set(record)
    assert record["usage"]["context_tokens"] > 0
    assert record["timings_ms"]["total"] >= record["timings_ms"]["retrieve"]
    assert all({"chunk_id", "label", "text", "score", "kind"} <= set(c) for c in record["contexts"])


def test_empty_and_oversized_questions_get_a_clear_message_and_no_search():
    index = RecordingIndex()
    pipeline = _pipeline(index, max_chars=4000)
    empty = pipeline.answer("   ")
    assert empty.answer.refused and "ask a question" in empty.answer.text
    huge = pipeline.answer("Is this allowed? " + "x" * 39_983)
    assert huge.answer.refused and "40,000 characters" in huge.answer.text
    emoji = pipeline.answer("👍👍 ???")
    assert emoji.answer.refused and "in words" in emoji.answer.text
    assert index.queries == []


def test_control_characters_and_non_english_text_do_not_crash():
    pipeline = _pipeline()
    assert pipeline.answer("What\x00 is\x07 a widget audit?\x1b").answer.text
    assert pipeline.answer("¿Qué es una auditoría de sesgo?").answer.text


def test_follow_up_in_a_thread_is_searched_with_the_earlier_question():
    index = RecordingIndex()
    history = [Turn("user", "I want to know how a seller must notify buyers."), Turn("assistant", "How can I help?")]
    _pipeline(index).answer("What are the methods?", history)
    assert index.queries == ["I want to know how a seller must notify buyers. What are the methods?"]


class VectorRecordingIndex(RecordingIndex):
    def __init__(self):
        super().__init__()
        self.vectors: list = []

    def hybrid_search(self, query, *, collection, limit, fusion="rankedFusion", alpha=0.5, vector=None):
        self.vectors.append(vector)
        return super().hybrid_search(query, collection=collection, limit=limit, fusion=fusion, alpha=alpha, vector=vector)


def test_a_follow_up_searched_with_the_earlier_question_leans_toward_its_own_part_and_its_answer_more():
    import numpy as np

    from storage.embedder import HashingEmbedder

    embed = HashingEmbedder(dim=512).embed_queries
    index = VectorRecordingIndex()
    pipeline = _pipeline(index)
    pipeline.embed_queries = embed
    earlier = "How must a seller notify buyers of a widget audit?"
    follow_up = "And the civil penalty?"
    history = [Turn("user", earlier), Turn("assistant", "By mail or e-mail.")]
    pipeline.answer(follow_up, history)
    assert index.queries == [f"{earlier} {follow_up}"]
    glued, own = embed([f"{earlier} {follow_up}", follow_up])
    searched = index.vectors[0]
    assert abs(float(np.linalg.norm(searched)) - 1.0) < 1e-5
    # closer to the follow-up's own words than the glued question alone is, and still about the thread
    assert float(searched @ own) > float(glued @ own)
    assert float(searched @ glued) > 0.5
    # a question that is not a follow-up is searched with its own vector
    index.vectors.clear()
    pipeline.answer("What is the civil penalty for a first violation?", history)
    assert np.allclose(index.vectors[0], embed(["What is the civil penalty for a first violation?"])[0])
    # the answer judges a follow-up by a vector leaning further toward it than the search ...
    index.vectors.clear()
    found = pipeline.retrieve(follow_up, history)
    assert float(found.query_vector @ own) > float(index.vectors[0] @ own)
    # ... unless it names nothing ("What are they?") to lean toward
    index.vectors.clear()
    found = pipeline.retrieve("What are they?", history)
    assert np.allclose(found.query_vector, index.vectors[0])


def test_the_generator_gets_the_embeddings_of_each_part_of_the_question_or_a_follow_ups_own_words():
    """A message's focus pieces (each sentence read on its own, not with the scene before it), or a
    follow-up's own words without the thread: the parts an answer's value sentence may be close in
    meaning to (core/extractive.py)."""
    import numpy as np

    from storage.embedder import HashingEmbedder

    embed = HashingEmbedder(dim=512).embed_queries

    class Recording:
        def generate(self, question, contexts, history=(), query_vector=None, asked=None, asking_vectors=None):
            self.asking_vectors = asking_vectors
            return ExtractiveGenerator(lambda c: TermStats.from_texts(ch.text for ch in TOY_CHUNKS)).generate(
                question, contexts, history, query_vector
            )

    generator = Recording()
    pipeline = _pipeline()
    pipeline.generator, pipeline.embed_queries = generator, embed
    # focus pieces as the provision ranking plans them (this pipeline has no provision search)
    pipeline._plan = lambda standalone, collection: QueryPlan.of(NormalisedQuestion(standalone))  # type: ignore[method-assign]
    scene, asks = "We put the notice on our shop door this morning.", "How many business days before selling must we wait?"
    pipeline.answer(f"{scene} {asks}")
    assert generator.asking_vectors is not None
    assert any(np.allclose(row, embed([asks])[0], atol=1e-5) for row in generator.asking_vectors)
    assert not any(np.allclose(row, embed([f"{scene} {asks}"])[0], atol=1e-5) for row in generator.asking_vectors)
    earlier = "How must a seller notify buyers of a widget audit?"
    pipeline.answer("and how many days before?", [Turn("user", earlier), Turn("assistant", "By mail.")])
    assert generator.asking_vectors.shape[0] == 1
    assert np.allclose(generator.asking_vectors[0], embed(["and how many days before?"])[0], atol=1e-5)


def test_a_short_follow_up_names_a_new_topic_only_with_words_the_question_before_it_lacks():
    earlier = "who is allowed to do the bias audit for us? can our own data science team do it?"
    assert new_topic(f"{earlier} and the penalties?", "and the penalties?") == {"penalti"}
    assert new_topic(f"{earlier} can they do it?", "can they do it?") == frozenset()  # nothing new
    long = "what if the team only advised the vendor on the model's features two years ago?"
    assert new_topic(f"{earlier} {long}", long) == frozenset()  # says enough in its own words
    assert new_topic("Who enforces the law?", None) == frozenset()
    # saying it goes on names nothing ("long" asks for the value, and the value's words never name a topic)
    assert new_topic(f"{earlier} for how long though?", "for how long though?") == {"long"}


def test_self_contained_question_is_searched_as_asked():
    history = [Turn("user", "What is a widget audit?")]
    q = "How many business days before selling a widget must the seller notify each buyer?"
    assert standalone_query(q, history) == q
    assert is_follow_up("And for employment agencies?")
    assert is_follow_up("What is its purpose?")


def test_a_short_question_that_names_its_own_subject_is_not_a_follow_up():
    assert not is_follow_up("Who enforces the law?")
    assert not is_follow_up("Different question - can our vendor run the audit itself?")
    assert is_follow_up("What are the methods?")  # too little of its own
    assert is_follow_up("even a state-run testing institute?")
    assert is_follow_up("for how long though?")  # "though" says it goes on; it names no subject
    assert not is_follow_up("How long do providers keep logs though?")


def test_a_short_question_with_a_scene_beside_it_is_a_follow_up_as_the_short_question_is():
    assert is_follow_up("what are the conditions? we've been using the tool for about 2 years.")
    assert is_follow_up("Thanks. And the penalties?")
    # ... but not one whose asking sentence names its own subject
    assert not is_follow_up("We're a staffing agency in Brooklyn. Who enforces the law?")
    assert not is_follow_up("Thanks. Does a staffing agency need a bias audit for every client?")


def test_a_new_question_in_a_thread_is_not_glued_to_the_one_before_it():
    # Pronouns that point inside the question, or a question naming enough of its own, stand alone:
    # glued to the earlier question, they were searched and answered as that one.
    history = [Turn("user", "Is social scoring of people banned?")]
    for q in (
        "must chatbots disclose that they are AI?",
        "Does an employer have to keep the audit summary on its website after it stops using the tool?",
    ):
        assert not is_follow_up(q)
        assert standalone_query(q, history) == q
    # ... while a pronoun that leans on the thread, a demonstrative asked about, or a word saying the
    # thread goes on keep the earlier question.
    assert is_follow_up("Once it's done, do we have to send it to anyone?")
    assert is_follow_up("Is that something we do once, or every year?")
    assert is_follow_up("we're a 40-person startup though. is it still 'whichever is higher' for us?")
    assert is_follow_up("Great. Do we need a notified body for the conformity assessment or can we do it ourselves?")
    assert standalone_query("Once it's done, do we have to send it to anyone?", history).startswith(history[0].content)


def test_a_follow_up_asking_the_same_of_someone_else_is_read_in_place():
    from storage.embedder import HashingEmbedder

    embed = HashingEmbedder(dim=512).embed_queries
    earlier = [Turn("user", "Does an employer have to publish the results of the bias audit?")]
    # "employer" is the phrase most like the new one (the hashing embedder: shared words)
    assert standalone_query("What about employer agencies?", earlier, embed) == (
        "Does an employer agencies have to publish the results of the bias audit?"
    )
    # nothing in the earlier question is like "the penalties": searched together
    assert standalone_query("And the penalties?", earlier, embed) == (
        "Does an employer have to publish the results of the bias audit? And the penalties?"
    )
    assert standalone_query("What about employer agencies?", earlier) == (  # no embedding model
        "Does an employer have to publish the results of the bias audit? What about employer agencies?"
    )


def test_a_machines_settings_never_reach_a_test(tmp_path):
    """tests/conftest.py clears them: with a key or a .env here, answers would silently be Claude's."""
    import os

    from bot.settings import Settings

    # The one HYPA_* a test run sets itself: no embedding tuning before a test's index (conftest).
    assert "ANTHROPIC_API_KEY" not in os.environ and not any(
        k.startswith("HYPA_") and not k.startswith("HYPA_TEST_") and k != "HYPA_TUNE_EMBEDDINGS" for k in os.environ
    )
    assert os.environ["HYPA_TUNE_EMBEDDINGS"] == "false"
    (tmp_path / ".env").write_text("ANTHROPIC_API_KEY=sk-from-a-dotenv\nHYPA_TOP_K=3\n")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        settings = Settings()
    finally:
        os.chdir(here)
    assert settings.anthropic_api_key == "" and settings.top_k == 12


def _copies() -> tuple[ScoredChunk, ScoredChunk]:
    enacted = make_chunk(
        "Admin. Code § 20-870",
        'Bias audit. The term "bias audit" means an impartial evaluation by an independent auditor. '
        "Employment decision. The term employment decision means to screen candidates for employment.",
        doc_id="bill",
    )
    codified = make_chunk(
        "Admin. Code § 20-870",
        "Bias audit.\nThe term “bias audit” means an impartial evaluation by an independent auditor.",
        doc_id="code",
    )
    return ScoredChunk(enacted, 2.0), ScoredChunk(codified, 1.0)


def test_one_provisions_two_copies_cut_at_different_places_are_kept_once():
    enacted, codified = _copies()
    assert drop_near_duplicates([enacted, codified]) == [enacted]
    assert drop_near_duplicates([codified, enacted]) == [codified]


def test_the_halves_of_one_paragraph_and_other_provisions_sharing_words_are_all_kept():
    enacted, codified = _copies()
    # the same words under another provision's label are that provision's own rule
    elsewhere = ScoredChunk(replace(codified.chunk, id="other", label="6 RCNY § 5-300"), 1.0)
    assert drop_near_duplicates([enacted, elsewhere]) == [enacted, elsewhere]
    first = make_chunk(
        "Art. 26(10)",
        "10. Deployers shall ask for an authorisation before the use of the system. "
        "The authorisation shall be requested within 48 hours.",
    )
    second = make_chunk(
        "Art. 26(10)",
        "The authorisation shall be requested within 48 hours. "
        "Deployers shall not use the system for any purpose other than the one authorised.",
    )
    halves = [ScoredChunk(first, 2.0), ScoredChunk(second, 1.0)]
    assert drop_near_duplicates(halves) == halves
