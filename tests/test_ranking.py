"""The learned provision ranking: segment signals (core/segments.py), features (core/ranking.py), the
weights file (core/linear.py) and the listwise training (core/ranking_train.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.asks import defined_terms
from core.errors import ModelWeightsError
from core.linear import LinearModel, load_model, save_models
from core.query import QueryPlan
from core.ranking import FEATURES, FeatureBuilder, ProvisionRanker, named_provisions
from core.ranking_train import TrainingSet, fit_weights, listwise_loss, read_training_questions
from core.segments import SegmentIndex, unit_texts
from hypa_testkit.toy import make_chunk
from storage.embedder import HashingEmbedder

CHUNKS = [
    make_chunk("Toy Act Art. 1", "Definitions. “Widget” means a small device. “Seller” means a person who sells widgets.",
               heading="Definitions"),
    make_chunk("Toy Act Art. 2(1)", "Sellers shall notify buyers ten business days before a sale. Notice may be given by mail.",
               heading="Notice to buyers"),
    make_chunk("Toy Act Art. 3", "Fines for sellers are up to EUR 500 for a first breach.", heading="Penalties"),
    make_chunk("Toy Act Recital 4", "Buyers should be told in good time before a sale of widgets by sellers.", heading=""),
]


class Vectors:
    """TextVectors over the hashing embedder (model-free, deterministic)."""

    def __init__(self) -> None:
        self.embedder = HashingEmbedder(dim=256)
        self.asked: list[str] = []

    def get(self, texts):
        self.asked += list(texts)
        return self.embedder.embed_passages(list(texts))


class BM25:
    def __init__(self, ids):
        self.ids = ids

    def ranked_ids(self, query, collection, limit):
        return self.ids[:limit]


def _builder():
    vectors = Vectors()
    return FeatureBuilder(SegmentIndex(CHUNKS, vectors)), vectors


def test_segment_signals_take_the_best_sentence_and_the_heading():
    segments = SegmentIndex(CHUNKS, Vectors())
    q = HashingEmbedder(dim=256).embed_queries(["notice may be given by mail"])[0]
    s = segments.signals(q)
    assert int(np.argmax(s.segment)) == 1  # Art. 2's second sentence is the question's words
    assert s.segment[1] > s.chunk[1]  # the sentence is closer than the whole provision
    assert s.heading[3] == 0.0  # no heading
    pieces = HashingEmbedder(dim=256).embed_queries(["fines for sellers", "a small device"])
    with_pieces = segments.signals(q, pieces)
    assert with_pieces.piece_segment[2] > s.segment[2] and with_pieces.piece_segment[0] > s.segment[0]


def test_unit_texts_are_what_the_segment_index_embeds():
    vectors = Vectors()
    SegmentIndex(CHUNKS, vectors)
    assert set(vectors.asked) == set(unit_texts(CHUNKS))


def test_features_by_name():
    builder, _ = _builder()
    embed = HashingEmbedder(dim=256).embed_queries
    plan = QueryPlan(text="How much is the fine for a seller under Article 3? What does widget mean?")
    x = builder.build(plan, embed([plan.text])[0], None, ["Toy Act Art. 3".replace(" ", "")])
    col = {name: i for i, name in enumerate(FEATURES)}
    assert x.shape == (4, len(FEATURES))
    assert list(x[:, col["recital"]]) == [0, 0, 0, 1] and list(x[:, col["definition"]]) == [1, 0, 0, 0]
    assert x[2, col["states_value"]] == 1 and x[1, col["states_value"]] == 0  # EUR 500 is how much
    assert x[0, col["defines_asked_term"]] == 1  # "widget" is defined there
    assert x[2, col["named"]] == 1 and x[1, col["named"]] == 0  # "Article 3"
    assert x[2, col["terms"]] > x[1, col["terms"]]
    assert x[:, col["bm25"]].max() == 0  # the BM25 id given matches no chunk id


def test_bm25_rank_features_and_the_ranker_order():
    builder, _ = _builder()
    embed = HashingEmbedder(dim=256).embed_queries
    plan = QueryPlan(text="notify buyers")
    ids = [CHUNKS[3].id, CHUNKS[1].id]
    x = builder.build(plan, embed([plan.text])[0], None, ids)
    col = {name: i for i, name in enumerate(FEATURES)}
    assert x[3, col["bm25"]] == 1.0 and x[1, col["bm25"]] == 0.5 and x[0, col["bm25"]] == 0.0
    only_bm25 = LinearModel.of(FEATURES, {"bm25": 1.0})
    ranked = ProvisionRanker(only_bm25, BM25(ids)).rank(plan, "toy", builder, embed([plan.text])[0], None, limit=2)
    assert [sc.chunk.label for sc in ranked] == ["Toy Act Recital 4", "Toy Act Art. 2(1)"]
    demote_recitals = LinearModel.of(FEATURES, {"bm25": 1.0, "recital": -5.0})
    ranked = ProvisionRanker(demote_recitals, BM25(ids)).rank(plan, "toy", builder, embed([plan.text])[0], None, limit=1)
    assert ranked[0].chunk.label == "Toy Act Art. 2(1)"


def test_named_provisions_and_defined_terms():
    assert named_provisions("see Article 50, Art. 99(3), § 5-303, Annex III and Example 3") == {
        ("art", "50"), ("art", "99"), ("section", "5-303"), ("annex", "III"), ("example", "3")
    }
    assert defined_terms(CHUNKS[0]) == {"widget", "seller"}
    assert defined_terms(make_chunk("6 RCNY § 5-300", "x", heading="Definitions — Impact Ratio; Selection Rate")) == {
        "impact ratio", "select rate"
    }


# ---------------------------------------------------------------------------------------------- weights
def test_weights_file_round_trip_and_clear_errors(tmp_path):
    path = tmp_path / "w.json"
    model = LinearModel.of(FEATURES, {"chunk": 2.0, "recital": -1.0})
    save_models(path, {"provisions": model}, "note")
    loaded = load_model(path, "provisions", FEATURES)
    assert loaded.as_dict() == model.as_dict()
    with pytest.raises(ModelWeightsError, match="not found"):
        load_model(tmp_path / "none.json", "provisions", FEATURES)
    with pytest.raises(ModelWeightsError, match="no model 'sentences'"):
        load_model(path, "sentences", FEATURES)
    with pytest.raises(ModelWeightsError, match="missing \\['extra'\\]"):
        load_model(path, "provisions", (*FEATURES, "extra"))
    data = json.loads(path.read_text())
    data["models"]["provisions"]["weights"]["chunk"] = "NaN"
    path.write_text(json.dumps(data))
    with pytest.raises(ModelWeightsError, match="finite"):
        load_model(path, "provisions", FEATURES)
    path.write_text("{not json")
    with pytest.raises(ModelWeightsError, match="unreadable"):
        load_model(path, "provisions", FEATURES)


def test_the_shipped_weights_load():
    from core.extractive import SENTENCE_FEATURES
    from core.linear import DEFAULT_WEIGHTS_FILE

    assert load_model(DEFAULT_WEIGHTS_FILE, "provisions", FEATURES).weights.shape == (len(FEATURES),)
    assert load_model(DEFAULT_WEIGHTS_FILE, "sentences", SENTENCE_FEATURES).weights.shape == (len(SENTENCE_FEATURES),)


# --------------------------------------------------------------------------------------------- training
def test_listwise_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    examples = [(rng.normal(size=(6, 3)), [np.array([1]), np.array([2, 4])]), (rng.normal(size=(5, 3)), [np.array([0])])]
    w = rng.normal(size=3)
    loss, grad = listwise_loss(w, examples, l2=0.1)
    eps = 1e-6
    numeric = [(listwise_loss(w + eps * e, examples, 0.1)[0] - listwise_loss(w - eps * e, examples, 0.1)[0]) / (2 * eps)
               for e in np.eye(3)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-6)


def test_fitting_learns_the_feature_that_marks_the_relevant_item():
    rng = np.random.default_rng(1)
    data = TrainingSet()
    for _ in range(40):
        x = rng.normal(size=(20, 3))
        best = int(np.argmax(x[:, 1]))  # feature 1 decides; 0 and 2 are noise
        data.examples.append((x, [np.array([best])]))
    w = fit_weights(data, l2=1e-3)
    assert w[1] > 3 * max(abs(w[0]), abs(w[2]))


def test_training_questions_read_only_answerable_rows_with_evidence(tmp_path):
    path = tmp_path / "q.jsonl"
    rows = [
        {"id": "a", "collection": "c", "question": "q1", "answerable": True, "evidence": ["span one"],
         "conversation_history": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "yes"}]},
        {"id": "b", "collection": "c", "question": "q2", "answerable": False, "evidence": []},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions = read_training_questions([path])
    assert [q.id for q in questions] == ["a"] and questions[0].history[0].content == "first"


def test_what_a_question_asks_for_and_what_a_passage_is():
    from core.asks import asks_actor, asks_definition, asks_list, defines, leads_a_list

    assert asks_actor("Who may conduct a bias audit?") and asks_actor("Which authority supervises banks' AI?")
    assert not asks_actor("What must a bias audit calculate?")
    assert asks_list("What must a bias audit calculate?") and asks_list("What information goes in the notice?")
    assert asks_definition("What is an AEDT?") and asks_definition("What counts as a 'simplified output'?")
    assert not asks_definition("What is the penalty for a first violation of the notice rules?")
    assert defines("The term “bias audit” means an impartial evaluation") and not defines("Sellers shall notify.")
    assert leads_a_list("a bias audit must, at a minimum:") and not leads_a_list("Sellers shall notify buyers.")


# ----------------------------------------------------------------------- "is X high-risk?": category lists
LIST_CHUNKS = [
    make_chunk("Toy Act Art. 6(1)", "A widget is a risky widget where it is a safety part of a product listed in Annex I.",
               heading="Classification rules for risky widgets"),
    make_chunk("Toy Act Art. 6(2)", "Widgets referred to in Annex III shall be considered risky widgets.",
               heading="Classification rules for risky widgets"),
    make_chunk("Toy Act Art. 16", "Providers of risky widgets shall keep a log of every sale of a risky widget.",
               heading="Obligations of providers of risky widgets"),
    make_chunk("Toy Act Art. 17", "Providers of risky widgets shall register each risky widget they sell.",
               heading="Obligations of providers of risky widgets"),
    make_chunk("Toy Act Annex I(1)", "Directive on toys and games for children.", heading="List of product legislation"),
    make_chunk("Toy Act Annex I(2)", "Regulation on medical devices and diagnostic equipment.",
               heading="List of product legislation"),
    make_chunk("Toy Act Annex III(1)", "Widgets used to select job applicants, to filter applications and rank candidates.",
               heading="Risky widgets referred to in Article 6(2)"),
    make_chunk("Toy Act Annex III(2)", "Widgets used to grade students and to assign them to schools.",
               heading="Risky widgets referred to in Article 6(2)"),
]


def test_a_classification_question_names_its_subject_and_category():
    from core.query import classification

    assert classification("is our CV-screening tool high risk? it ranks applicants") == (
        "our CV-screening tool", frozenset({"high", "risk"}))
    assert classification("Is emotion recognition at work banned under the AI Act?") == (
        "emotion recognition at work", frozenset({"prohibit"}))  # the law's word for what people call banned
    assert classification("Does a resume screener count as an AEDT?") == ("a resume screener", frozenset({"aedt"}))
    assert classification("What is an AEDT?") is None and classification("Who enforces the law?") is None
    # a pronoun stands for what the clause before it says
    assert classification("we use AI to screen CVs, is that high risk?") == (
        "we use AI to screen CVs", frozenset({"high", "risk"}))
    assert classification("We rank applicants with a model. Is it high-risk?") == (
        "We rank applicants with a model", frozenset({"high", "risk"}))
    # a clause that only qualifies names nothing; nothing before, and the pronoun stays
    assert classification("We schedule shifts with it, which is fine, is that high-risk?")[0] == "We schedule shifts with it"
    assert classification("Thanks. Is it high-risk?") == ("it", frozenset({"high", "risk"}))


def test_whether_x_is_allowed_or_covered_is_asked_of_the_prohibitions_and_the_scope():
    """'Is it allowed to X?' is answered by the list of what is prohibited; 'does the act apply to X /
    is X covered / does X fall under it?' by the list of what the law covers (its Scope)."""
    from core.query import classification

    prohibited, scope = frozenset({"prohibit"}), frozenset({"scope"})
    assert classification("is it allowed to use emotion recognition on employees?") == (
        "use emotion recognition on employees", prohibited)
    assert classification("Is it banned to use AI-driven dark patterns?") == ("use AI-driven dark patterns", prohibited)
    assert classification("does the AI act apply to a US company with no EU office") == (
        "a US company with no EU office", scope)
    assert classification("Is our chatbot covered by the AI Act?") == ("our chatbot", scope)
    assert classification("Does our recruiting tool fall under the AI Act?") == ("our recruiting tool", scope)
    # "us" stands for what the clause before says about who asks
    assert classification("we only sell outside the EU from Texas. does the act apply to us?") == (
        "we only sell outside the EU from Texas", scope)
    assert classification("we only sell outside the EU from Texas, does the act apply to us?") == (
        "we only sell outside the EU from Texas", scope)  # ", does the act …" opens a clause of its own
    # "is that (even) allowed?" after a scenario asks it of the scenario
    assert classification("We want cameras that read our staff's moods. Is that even allowed in the EU?") == (
        "We want cameras that read our staff's moods", prohibited)
    assert classification("We score video interviews for enthusiasm, is that legal or just high risk?") == (
        "We score video interviews for enthusiasm", prohibited)
    assert classification("Is that allowed?") == ("that", prohibited)  # nothing before: no subject to ask of
    # "can we use X?" asks whether X is allowed at all
    assert classification("can we use emotion recognition on our employees at work?") == (
        "emotion recognition on our employees at work", prohibited)
    assert classification("May an employer run social scoring on its staff?") == ("social scoring on its staff", prohibited)
    assert classification("Can we ask the notified body for an extension?") is None
    # "are we on the hook?" asks whether the law covers what the clause before says about who asks
    assert classification("We're a US startup, but customers in Germany use our API. Are we on the hook under the AI Act?") == (
        "customers in Germany use our API", scope)
    # covered by a named rule: that rule is the category
    assert classification("Is our tool covered by the notice requirement?")[1] == frozenset({"notic", "requir"})
    assert classification("Do we have to apply to the notified body?") is None


def test_the_best_matching_item_of_each_list_defining_the_category_is_marked():
    """'Is X a risky widget?': the lists that define risky widgets are Art. 6 (its heading classifies
    them), Annex III (its heading is about them) and Annex I (Art. 6 relies on it); Art. 16-17 are
    about providers of risky widgets, not a definition of them. In each list the item closest to X is
    marked 1, the next 0.5."""
    embed = HashingEmbedder(dim=256).embed_queries
    builder = FeatureBuilder(SegmentIndex(LIST_CHUNKS, Vectors()))
    plan = QueryPlan(text="Is a widget that ranks job applicants considered a risky widget?",
                     pieces=("a widget that ranks job applicants",), subject="a widget that ranks job applicants",
                     category=frozenset({"riski", "widget"}))
    x = builder.build(plan, embed([plan.text])[0], embed(list(plan.pieces)), [])
    marks = dict(zip((c.label for c in LIST_CHUNKS), x[:, FEATURES.index("listed_subject")]))
    assert marks["Toy Act Annex III(1)"] == 1.0 and marks["Toy Act Annex III(2)"] == 0.5
    assert {marks["Toy Act Art. 6(1)"], marks["Toy Act Art. 6(2)"]} == {1.0, 0.5}
    assert {marks["Toy Act Annex I(1)"], marks["Toy Act Annex I(2)"]} == {1.0, 0.5}
    assert marks["Toy Act Art. 16"] == marks["Toy Act Art. 17"] == 0.0
    # Any other question marks nothing.
    other = QueryPlan(text="Who keeps a log of sales?")
    assert not builder.build(other, embed([other.text])[0], None, [])[:, FEATURES.index("listed_subject")].any()


def test_the_plan_carries_the_subject_only_when_it_is_searched_as_a_piece():
    from core.lexicon import NormalisedQuestion

    plan = QueryPlan.of(NormalisedQuestion("Is a widget that ranks job applicants considered a risky widget?"))
    assert plan.subject == "a widget that ranks job applicants" and plan.subject in plan.pieces
    assert plan.category == {"riski", "widget"}
    assert QueryPlan.of(NormalisedQuestion("Who keeps a log of sales?")).subject == ""


def test_extending_a_model_keeps_its_weights_and_fits_only_the_new_feature():
    rng = np.random.default_rng(2)
    data = TrainingSet()
    for _ in range(40):
        x = rng.normal(size=(20, 3))
        data.examples.append((x, [np.array([int(np.argmax(x[:, 2]))])]))  # the new feature 2 decides
    w = fit_weights(data, l2=1e-3, fixed={0: 0.7, 1: -0.2})
    assert (w[0], w[1]) == (0.7, -0.2) and w[2] > 1.0
    assert list(fit_weights(data, fixed={0: 1.0, 1: 2.0, 2: 3.0})) == [1.0, 2.0, 3.0]  # nothing new: as given
