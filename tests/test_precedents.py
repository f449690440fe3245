"""Precedents (core/precedents.py): questions whose answering provisions are known, read from JSON
Lines, tied to a collection's chunks, and voting for them when a new question means nearly the same."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bot.corpus import load_manifest
from bot.settings import Settings
from bot.wiring import collection_precedents
from core.errors import PrecedentError
from core.linear import LinearModel
from core.precedents import Precedent, PrecedentConfig, Precedents, read_precedents
from core.query import QueryPlan
from core.ranking import FEATURES, FeatureBuilder, ProvisionRanker
from core.segments import SegmentIndex
from hypa_testkit.toy import make_chunk
from storage.embedder import HashingEmbedder

CHUNKS = [
    make_chunk("Toy Act Art. 1", "“Widget” means a small device.\nA “seller” means a person who sells widgets."),
    make_chunk("Toy Act Art. 2", "Sellers shall notify buyers ten business days before a sale."),
    make_chunk("Toy Act Art. 3", "Fines for sellers are up to EUR 500 for a first breach."),
]
EMBED = HashingEmbedder(dim=256).embed_queries


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_rows_with_evidence_provisions_or_none_answering_are_read_and_conversations_skipped(tmp_path):
    path = _write(tmp_path / "p.jsonl", [
        {"question": "How early must buyers hear about a sale?", "evidence": ["ten business days before a sale"]},
        {"question": "What is the top fine?", "gold_provisions": ["Toy Act Art. 3"], "answerable": True},
        {"question": "and for a second one?", "evidence": ["x"], "conversation_history": [{"role": "user", "content": "fines?"}]},
        {"question": "Is there a licence fee?", "evidence": [], "answerable": False},
        {"question": "Who enforces it?", "gold_provisions": [], "review_state": "corrected"},  # names none
        # a refusal a reviewer confirmed (hypa feedback export --reviewed)
        {"question": "Is there a registration fee?", "gold_provisions": [], "refused": True, "review_state": "fine"},
        "",
    ])
    assert read_precedents(path) == [
        Precedent("How early must buyers hear about a sale?", ("ten business days before a sale",)),
        Precedent("What is the top fine?", (), ("Toy Act Art. 3",)),
        Precedent("Is there a licence fee?", answerable=False),
        Precedent("Is there a registration fee?", answerable=False),
    ]


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "p.jsonl:1: not JSON"),
    (json.dumps({"evidence": ["x"]}), "p.jsonl:1: a precedent needs a \"question\""),
    (json.dumps({"question": "What is a widget?"}), "needs \"evidence\" spans or \"gold_provisions\" labels"),
    (json.dumps({"question": "What is a widget?", "evidence": "a small device"}), "\"evidence\" must be a list of texts"),
])
def test_a_bad_row_is_named_by_file_and_line(tmp_path, line, message):
    with pytest.raises(PrecedentError, match=message.replace("(", r"\(")):
        read_precedents(_write(tmp_path / "p.jsonl", [line]))


def test_an_unreadable_file_is_named(tmp_path):
    with pytest.raises(PrecedentError, match="cannot read precedents .*missing.jsonl"):
        read_precedents(tmp_path / "missing.jsonl")


def test_a_close_question_votes_for_the_provisions_that_answered_its_precedent():
    precedents = Precedents(CHUNKS, [
        # evidence is matched folded: line breaks, quote styles and case do not matter
        Precedent("how far ahead do sellers have to notify buyers", ('TEN business\ndays before a "sale"',)),
        Precedent("what does widget mean", (), ("Toy Act Art. 1",)),
        Precedent("a question about something this collection lacks", ("nowhere in the toy act",)),
    ], EMBED, PrecedentConfig(weight=1.0, neighbours=5, min_similarity=0.7))
    assert len(precedents) == 2 and precedents.unresolved == 1
    votes = precedents.votes(EMBED(["how far ahead do sellers have to notify buyers?"])[0])
    assert votes.argmax() == 1 and votes[1] > 0.7 and votes[0] == 0 and votes[2] == 0
    assert not precedents.votes(EMBED(["penalties for a first breach"])[0]).any()  # like no precedent: no votes


def test_only_the_nearest_neighbours_vote_and_a_precedent_shares_its_vote_among_its_provisions():
    question = "how far ahead do sellers have to notify buyers"
    precedents = Precedents(CHUNKS, [
        Precedent(question, ("ten business days",)),
        Precedent(question + " of a sale", ("EUR 500", "small device")),
    ], EMBED, PrecedentConfig(neighbours=1, min_similarity=0.5))
    votes = precedents.votes(EMBED([question])[0])
    assert votes[1] == pytest.approx(1.0, abs=1e-5) and votes[0] == votes[2] == 0  # only the nearest voted
    shared = Precedents(CHUNKS, [Precedent(question, ("EUR 500", "small device"))], EMBED).votes(EMBED([question])[0])
    assert shared[0] == shared[2] == pytest.approx(0.5, abs=1e-5) and shared[1] == 0


def test_a_question_nearest_to_one_the_law_does_not_answer_is_declined():
    precedents = Precedents(CHUNKS, [
        Precedent("how far ahead do sellers have to notify buyers", ("ten business days",)),
        Precedent("do sellers need liability insurance for widgets", answerable=False),
    ], EMBED, PrecedentConfig(min_decline_similarity=0.75))
    assert len(precedents) == 1 and precedents.unanswered == ["do sellers need liability insurance for widgets"]
    declined = precedents.declined(EMBED(["do sellers need liability insurance for their widgets?"])[0])
    assert declined is not None and declined[0] == "do sellers need liability insurance for widgets" and declined[1] >= 0.75
    assert precedents.declined(EMBED(["how far ahead do sellers have to notify buyers?"])[0]) is None  # an answered one is nearer
    assert precedents.declined(EMBED(["insurance"])[0]) is None  # not close enough
    # an unanswered precedent neither votes nor needs provisions
    assert not precedents.votes(EMBED(["do sellers need liability insurance for widgets"])[0]).any()


def test_no_precedents_no_votes():
    assert not Precedents(CHUNKS, [], EMBED).votes(EMBED(["anything"])[0]).any()


def test_the_ranker_adds_a_prior_to_its_learned_score():
    class NoBM25:
        def ranked_ids(self, query, collection, limit):
            return []

    class Vectors:
        def get(self, texts):
            return HashingEmbedder(dim=256).embed_passages(list(texts))

    builder = FeatureBuilder(SegmentIndex(CHUNKS, Vectors()))
    plan = QueryPlan(text="sellers")
    ranker = ProvisionRanker(LinearModel.of(FEATURES, {"chunk": 1.0}), NoBM25())
    query = EMBED([plan.text])[0]
    plain = ranker.rank(plan, "toy", builder, query, None, limit=3)
    assert plain[0].chunk.label != "Toy Act Art. 3"
    prior = np.array([0.0, 0.0, 10.0], dtype=np.float32)
    assert ranker.rank(plan, "toy", builder, query, None, limit=3, prior=prior)[0].chunk.label == "Toy Act Art. 3"


def test_the_shipped_precedents_load_for_their_corpora():
    for corpus in load_manifest().corpora.values():
        path = corpus.precedents_path()
        assert path is not None and path.is_file(), corpus.collection
        rows = read_precedents(path)
        answered = [p for p in rows if p.answerable]
        assert len(answered) >= 100 and all(p.evidence for p in answered)
        assert any(not p.answerable and not p.evidence for p in rows)


def test_own_files_add_to_the_manifests_and_can_be_switched_off(tmp_path):
    own = tmp_path / "precedents"
    own.mkdir()
    _write(own / "ll144.jsonl", [{"question": "Who audits the tool?", "gold_provisions": ["6 RCNY § 5-300"]}])
    _write(own / "toy.jsonl", [{"question": "What is a widget?", "evidence": ["a small device"]}])
    # an export of reviewed exchanges: each row names its collection
    _write(own / "reviewed.jsonl", [
        {"question": "What is a gadget?", "gold_provisions": ["Toy Act Art. 1"], "collection": "toy"},
        {"question": "Who fines?", "gold_provisions": ["Admin. Code § 20-872(a)"], "collection": "ll144"},
    ])
    found = collection_precedents(Settings(data_dir=tmp_path))
    shipped = len(read_precedents(load_manifest().get("ll144").precedents_path()))  # type: ignore[arg-type]
    assert len(found["ll144"]) == shipped + 2 and "reviewed" not in found
    assert [p.question for p in found["toy"]] == ["What is a gadget?", "What is a widget?"]
    assert collection_precedents(Settings(data_dir=tmp_path, precedents=False)) == {}
    _write(own / "toy.jsonl", ["{broken"])
    with pytest.raises(PrecedentError, match="toy.jsonl:1"):
        collection_precedents(Settings(data_dir=tmp_path))
