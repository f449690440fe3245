"""Evaluation harness: gold-field isolation, error handling, metrics on hand-computed cases, report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from core.eval import DatasetError, build_report, load_scope_review, render_markdown, render_rich, run_eval
from core.eval.metrics import (
    answer_similarity,
    citation_valid,
    content_word_set,
    content_words,
    context_recall,
    percentile,
    word_recall_f1,
)
from core.eval.report import DEFAULT_SCOPE_REVIEW, read_gold
from core.types import Answer, Chunk, Citation, PipelineResult, RetrievalParams, ScoredChunk, Turn, Usage

CANARY = "CANARY-7f3a9c-DO-NOT-LEAK"
SHARED_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "eval" / "ll144_dev.jsonl"


def _chunk(cid: str, text: str) -> Chunk:
    return Chunk(
        id=cid,
        collection="test",
        doc_id="doc",
        doc_title="Doc",
        label=f"§ {cid}",
        heading="",
        text=text,
        page_start=1,
        page_end=1,
        char_start=0,
        char_end=len(text),
    )


class FakeAnswerer:
    """Records every call; answers with a fixed context and a valid citation; can be told to fail."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[dict] = []
        self.fail_on = fail_on

    def answer(self, question, history=(), *, collection=None) -> PipelineResult:
        self.calls.append({"question": question, "history": history, "collection": collection})
        if self.fail_on and self.fail_on in question:
            raise RuntimeError("index exploded")
        chunk = _chunk("c1", "A bias audit must be conducted\nno more than one year prior to use.")
        return PipelineResult(
            question=question,
            answer=Answer(
                text=f"Answer to: {question} [1]",
                refused=False,
                citations=[
                    Citation(n=1, chunk_id="c1", label="§ c1", quote="conducted no more than one year")
                ],
                usage=Usage(context_tokens=17, input_tokens=20, output_tokens=5),
            ),
            contexts=[ScoredChunk(chunk, 0.9)],
            queries=[question],
            params=RetrievalParams(top_k=5, fusion="rankedFusion", alpha=0.5),
            complexity=0,
            timings_ms={"retrieve": 3.0, "generate": 1.0, "total": 4.5},
        )


def _write_jsonl(path: Path, rows: list) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def _poisoned_rows() -> list[dict]:
    poison = {
        "reference_answer": f"The answer is {CANARY}.",
        "reference_context": f"Document 1: {CANARY} secret passage",
        "metadata": {"question_type": f"simple {CANARY}", "hint": CANARY},
        "extra_field": CANARY,
    }
    return [
        {"id": "q1", "question": "Do I need a bias audit?", "conversation_history": [], **poison},
        {
            "id": "q2",
            "question": "And how often?",
            "conversation_history": [
                {"role": "user", "content": "Tell me about bias audits."},
                {"role": "assistant", "content": "How can I help you with that?"},
            ],
            **poison,
        },
        {"id": 3, "question": "What notice is required?", **poison},  # no history field, integer id
    ]


# ------------------------------------------------------------------------------------- run_eval
def test_gold_fields_never_reach_answerer_or_output(tmp_path):
    ds = _write_jsonl(tmp_path / "ds.jsonl", _poisoned_rows())
    out = tmp_path / "out" / "results.jsonl"
    fake = FakeAnswerer()
    summary = run_eval(ds, out, fake, "ll144", progress=False)

    assert summary.rows == 3 and summary.errors == 0
    assert [c["question"] for c in fake.calls] == [
        "Do I need a bias audit?",
        "And how often?",
        "What notice is required?",
    ]
    assert all(c["collection"] == "ll144" for c in fake.calls)
    assert CANARY not in repr(fake.calls)
    text = out.read_text(encoding="utf-8")
    assert CANARY not in text

    rows = [json.loads(line) for line in text.splitlines()]
    assert [r["id"] for r in rows] == ["q1", "q2", 3]
    expected_keys = {
        "id",
        "question",
        "answer",
        "refused",
        "note",
        "model",
        "citations",
        "contexts",
        "queries",
        "complexity",
        "params",
        "usage",
        "diagnostics",
        "timings_ms",
    }
    assert set(rows[0]) == expected_keys
    assert rows[0]["citations"][0] == {
        "n": 1,
        "chunk_id": "c1",
        "label": "§ c1",
        "quote": "conducted no more than one year",
        "url": "",  # where it links to (core/links.py): this toy document has no link
    }
    assert rows[0]["contexts"][0]["chunk_id"] == "c1" and rows[0]["contexts"][0]["kind"] == "chunk"
    assert rows[0]["usage"] == {
        "context_tokens": 17, "input_tokens": 20, "output_tokens": 5,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
    }
    assert rows[0]["timings_ms"]["total"] == 4.5


def test_conversation_history_is_passed_as_turns(tmp_path):
    ds = _write_jsonl(tmp_path / "ds.jsonl", _poisoned_rows())
    fake = FakeAnswerer()
    run_eval(ds, tmp_path / "r.jsonl", fake, None, progress=False)
    assert tuple(fake.calls[0]["history"]) == ()
    hist = tuple(fake.calls[1]["history"])
    assert hist == (
        Turn(role="user", content="Tell me about bias audits."),
        Turn(role="assistant", content="How can I help you with that?"),
    )
    assert all(isinstance(t, Turn) for t in hist)
    assert tuple(fake.calls[2]["history"]) == ()
    assert fake.calls[0]["collection"] is None


def test_failing_row_is_recorded_and_run_continues(tmp_path):
    ds = _write_jsonl(tmp_path / "ds.jsonl", _poisoned_rows())
    out = tmp_path / "r.jsonl"
    summary = run_eval(ds, out, FakeAnswerer(fail_on="how often"), "ll144", progress=True)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3 and summary.errors == 1 and summary.rows == 3
    assert "error" not in rows[0] and "error" not in rows[2]
    assert rows[1]["id"] == "q2" and rows[1]["error"].startswith("RuntimeError: index exploded")
    assert CANARY not in out.read_text(encoding="utf-8")


def test_bad_json_line_names_line_number_and_answers_nothing(tmp_path):
    rows = _poisoned_rows()
    ds = _write_jsonl(tmp_path / "ds.jsonl", [rows[0], "", '{"id": "q9", "question": "broken",'])
    fake = FakeAnswerer()
    out = tmp_path / "r.jsonl"
    with pytest.raises(DatasetError, match=r"ds\.jsonl:3: invalid JSON"):
        run_eval(ds, out, fake, "ll144", progress=False)
    assert fake.calls == [] and not out.exists()


@pytest.mark.parametrize(
    "row, message",
    [
        ({"question": "q"}, "missing or invalid 'id'"),
        ({"id": "a"}, "'question'"),
        ({"id": "a", "question": "q", "conversation_history": [{"role": "bot", "content": "x"}]}, "role"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_malformed_rows_are_rejected_with_line(tmp_path, row, message):
    ds = _write_jsonl(tmp_path / "ds.jsonl", [{"id": "ok", "question": "fine"}, row])
    with pytest.raises(DatasetError, match=r":2: .*" + message):
        run_eval(ds, tmp_path / "r.jsonl", FakeAnswerer(), None, progress=False)


def test_duplicate_ids_rejected(tmp_path):
    ds = _write_jsonl(tmp_path / "ds.jsonl", [{"id": "a", "question": "x"}, {"id": "a", "question": "y"}])
    with pytest.raises(DatasetError, match=r":2: duplicate id"):
        run_eval(ds, tmp_path / "r.jsonl", FakeAnswerer(), None, progress=False)


# -------------------------------------------------------------------------------------- metrics
def test_content_words_tokenisation():
    words = content_words("Under § 20-871(b)(3) and 6 RCNY § 5-301, the employer's audits; ratio 0.979.")
    assert words == ["20-871", "3", "6", "rcni", "5-301", "employ", "audit", "ratio", "0.979"]
    assert content_words("The audits are required") == content_words("an audit is requires")


def test_context_recall_hand_computed():
    # reference content words: employ, must, notifi, candid  (4)
    # contexts cover: employ, notifi, candid (+ shall, each, ...)   -> 3/4
    assert (
        context_recall("The employer must notify candidates.", ["Employers shall notify", "each candidate"])
        == 0.75
    )
    assert context_recall("The employer must notify candidates.", []) == 0.0
    assert (
        context_recall("The employer must notify candidates.", ["must notify the employers and candidates"])
        == 1.0
    )
    assert context_recall("It is what it is.", ["anything"]) is None  # only stopwords


def test_word_recall_f1_hand_computed():
    # reference: annual, bias, audit, requir (4); answer: bias, audit, year (3); common 2
    s = word_recall_f1("A bias audit yearly", "An annual bias audit is required")
    assert s.recall == pytest.approx(0.5)
    assert s.precision == pytest.approx(2 / 3)
    assert s.f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    # repeated words count once
    assert word_recall_f1("audit audit audit", "audit").f1 == 1.0
    assert word_recall_f1("", "audit").f1 == 0.0
    assert word_recall_f1("audit", "the of and") is None


def test_answer_similarity_with_fake_embedder():
    table = {"a": [1.0, 0.0], "b": [0.0, 2.0], "c": [3.0, 3.0], "z": [0.0, 0.0]}
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return np.array([table[t] for t in texts])

    sims = answer_similarity(["a", "a", "c", "z"], ["a", "b", "a", "a"], embed)
    assert sims == pytest.approx([1.0, 0.0, math.sqrt(0.5), 0.0])
    assert calls == [["a", "a", "c", "z", "a", "b", "a", "a"]]  # one batched call
    assert answer_similarity([], [], embed) == []
    with pytest.raises(ValueError):
        answer_similarity(["a"], [], embed)


def test_citation_validity_true_and_false():
    contexts = [
        {"chunk_id": "c1", "text": "A bias audit must be conducted\n  no more than one year prior to use."},
        {"chunk_id": "c2", "text": "Notice must be given ten business days before use."},
    ]
    ok = {"chunk_id": "c1", "quote": "conducted no more than one year"}
    assert citation_valid(ok, contexts)  # whitespace runs (incl. newline) collapse
    assert citation_valid(Citation(n=1, chunk_id="c1", label="x", quote="  bias   audit "), contexts)
    assert not citation_valid(
        {"chunk_id": "c2", "quote": "conducted no more than one year"}, contexts
    )  # wrong chunk
    assert not citation_valid({"chunk_id": "c9", "quote": "bias audit"}, contexts)  # unknown chunk
    assert not citation_valid(
        {"chunk_id": "c1", "quote": "Conducted no more than one year"}, contexts
    )  # case
    assert not citation_valid(
        {"chunk_id": "c1", "quote": "conducted no more than 1 year"}, contexts
    )  # paraphrase
    assert not citation_valid({"chunk_id": "c1", "quote": "conducted ... one year"}, contexts)  # ellipsis
    assert not citation_valid({"chunk_id": "c1", "quote": "   "}, contexts)  # empty


def test_percentile_matches_numpy():
    xs = [7.0, 1.0, 3.0, 2.0, 10.0]
    for q in (0, 25, 50, 90, 95, 100):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))
    assert percentile([], 50) is None
    assert percentile([4.0], 95) == 4.0
    with pytest.raises(ValueError):
        percentile(xs, 101)


# --------------------------------------------------------------------------------------- report
def _gold_row(rid, qtype, ref):
    return {
        "id": rid,
        "question": "q",
        "reference_answer": ref,
        "reference_context": "",
        "conversation_history": [],
        "metadata": {"question_type": qtype},
    }


def _result_row(rid, *, refused, answer="", contexts=(), citations=(), total=10.0, ctx_tokens=100):
    return {
        "id": rid,
        "question": "q",
        "answer": answer,
        "refused": refused,
        "note": "",
        "model": "fake",
        "citations": list(citations),
        "contexts": list(contexts),
        "queries": ["q"],
        "complexity": 0,
        "params": {"top_k": 5, "fusion": "rankedFusion", "alpha": 0.5},
        "usage": {"context_tokens": ctx_tokens, "input_tokens": 0, "output_tokens": 0},
        "timings_ms": {"retrieve": total / 2, "generate": total / 4, "total": total},
    }


@pytest.fixture()
def report_files(tmp_path):
    refusal = "This question can not be answered by the context."
    gold = _write_jsonl(
        tmp_path / "gold.jsonl",
        [
            _gold_row("s1", "simple", "Employers must notify candidates."),
            _gold_row("s2", "simple", "A bias audit is required annually."),
            _gold_row("o1", "out of scope", refusal),  # stays out of scope
            _gold_row("o2", "out of scope", refusal),  # stays out of scope
            _gold_row("o3", "out of scope", refusal),  # review: in scope
            _gold_row("o4", "out of scope", refusal),  # review: borderline
            _gold_row("e1", "complex", "Whatever."),  # errors
            _gold_row("m1", "simple", "Missing row."),  # no result
        ],
    )
    ctx = {
        "chunk_id": "c1",
        "label": "x",
        "text": "Employers shall notify each candidate.",
        "score": 1.0,
        "kind": "chunk",
    }
    results = _write_jsonl(
        tmp_path / "results.jsonl",
        [
            _result_row(
                "s1",
                refused=False,
                answer="Employers notify candidates.",
                contexts=[ctx],
                citations=[
                    {"n": 1, "chunk_id": "c1", "label": "x", "quote": "shall notify"},
                    {"n": 2, "chunk_id": "c1", "label": "x", "quote": "must notify"},
                ],
                total=10,
            ),
            _result_row("s2", refused=True, answer="I cannot say whether to notify.", total=20),
            _result_row("o1", refused=True, answer="Not covered.", total=30),
            _result_row("o2", refused=False, answer="Some answer.", total=40),
            _result_row("o3", refused=True, answer="Not covered.", total=50),
            _result_row("o4", refused=False, answer="Partial.", total=60),
            {"id": "e1", "question": "q", "error": "RuntimeError: boom", "timings_ms": {"total": 1.0}},
            _result_row("zz", refused=False, total=1000),  # not in gold: ignored
        ],
    )
    review = tmp_path / "review.toml"
    review.write_text(
        '[[review]]\nid = "o3"\nin_scope = true\nprovision = "§ 20-871(b)(3)"\nnote = "30 days"\n\n'
        '[[review]]\nid = "o4"\nin_scope = false\nborderline = true\nnote = "partly"\n',
        encoding="utf-8",
    )
    return results, gold, review


def _fake_embed(texts):
    # two features: [mentions "notify", 1]; deterministic and not constant
    return np.array([[1.0 if "notify" in t.lower() else 0.0, 1.0] for t in texts])


def test_report_scores_and_scope_corrections(report_files):
    results, gold, review = report_files
    r = build_report(results, gold, review, _fake_embed)

    # refusal rates use the corrected scope: out = {o1 refused, o2 answered}; in = {s1, s2 refused, o3 refused}
    assert (r.out_of_scope.n, r.out_of_scope.refused) == (2, 1) and r.out_of_scope.refusal_rate == 0.5
    assert (r.in_scope.n, r.in_scope.refused) == (3, 2) and r.in_scope.refusal_rate == pytest.approx(2 / 3)
    assert (r.borderline.n, r.borderline.refused) == (1, 0)
    assert {x["id"] for x in r.relabelled} == {"o3", "o4"}

    # without the review: o3 and o4 are out of scope
    plain = build_report(results, gold, None, None)
    assert (plain.out_of_scope.n, plain.out_of_scope.refused) == (4, 2)
    assert (plain.in_scope.n, plain.in_scope.refused) == (2, 1)
    assert plain.overall.answer_similarity is None and not plain.similarity_computed

    o = r.overall
    assert o.n == 7 and o.errors == 1  # zz ignored, m1 missing
    assert r.missing_ids == ["m1"] and r.unknown_ids == ["zz"]
    # answer quality only on s1, s2 (o3's reference is the refusal text)
    assert o.n_reference == 2
    assert o.context_recall == pytest.approx((0.75 + 0.0) / 2)
    s1 = word_recall_f1("Employers notify candidates.", "Employers must notify candidates.")
    s2 = word_recall_f1("I cannot say whether to notify.", "A bias audit is required annually.")
    assert o.word_recall == pytest.approx((s1.recall + s2.recall) / 2)
    assert o.word_f1 == pytest.approx((s1.f1 + s2.f1) / 2)
    assert o.answer_similarity == pytest.approx((1.0 + math.sqrt(0.5)) / 2)
    # citations: "shall notify" valid, "must notify" not in c1
    assert (o.citations, o.citations_valid, o.citation_validity) == (2, 1, 0.5)
    assert o.context_tokens == 100
    totals = [10, 20, 30, 40, 50, 60]
    assert o.latency_p50_ms == pytest.approx(np.percentile(totals, 50))
    assert o.latency_p95_ms == pytest.approx(np.percentile(totals, 95))
    assert r.stages == ["retrieve", "generate"]
    assert o.stage_p50_ms["retrieve"] == pytest.approx(np.percentile(totals, 50) / 2)

    by = {g.name: g for g in r.by_type}
    assert [g.name for g in r.by_type] == ["simple", "complex", "out of scope"]
    assert by["complex"].errors == 1 and by["complex"].refusal_rate is None
    assert by["out of scope"].refusal_rate == 0.5 and by["out of scope"].n_reference == 0
    assert by["simple"].refusal_rate == 0.5

    md = render_markdown(r)
    assert "| all | 7 | 1 |" in md and "| out of scope (reviewed) | 2 | 1 | 50.0% |" in md
    render_rich(r)  # must not raise
    json.dumps(r.to_dict())  # serialisable


def test_report_bad_results_line(report_files, tmp_path):
    _, gold, review = report_files
    bad = _write_jsonl(tmp_path / "bad.jsonl", [_result_row("s1", refused=False), "not json"])
    with pytest.raises(DatasetError, match=r"bad\.jsonl:2: invalid JSON"):
        build_report(bad, gold, review, None)


def test_scope_review_validation(tmp_path):
    p = tmp_path / "r.toml"
    p.write_text('[[review]]\nid = "x"\nin_scope = true\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="provision"):
        load_scope_review(p)
    p.write_text('[[review]]\nid = "x"\nin_scope = "yes"\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="boolean"):
        load_scope_review(p)


def test_committed_scope_review_covers_dev_out_of_scope_questions():
    review = load_scope_review(DEFAULT_SCOPE_REVIEW)
    assert len(review) == 16
    for v in review.values():
        assert v.note
        if v.in_scope:
            assert "§" in v.provision
    if not SHARED_DEV.exists():
        pytest.skip("dev set not available")
    oos = set()
    with SHARED_DEV.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["metadata"]["question_type"] == "out of scope":
                oos.add(row["id"])
    assert set(review) == oos


def test_report_shows_llm_tokens_and_cost_per_1000_questions():
    from core.eval.report import summarize_llm_usage
    from core.llm.cost import estimate_cost

    usage = {"context_tokens": 900, "input_tokens": 1500, "output_tokens": 200,
             "cache_read_input_tokens": 400, "cache_creation_input_tokens": 0}
    rows = [
        {"id": "a", "model": "claude-haiku-4-5", "usage": usage},
        {"id": "b", "model": "claude-haiku-4-5", "usage": {**usage, "input_tokens": 500, "output_tokens": 100}},
        {"id": "c", "model": "extractive", "usage": {"context_tokens": 900, "input_tokens": 0, "output_tokens": 0}},
        {"id": "d", "error": "Boom", "usage": usage},
    ]
    summary = summarize_llm_usage(rows)
    assert summary.rows == 2 and summary.models == {"claude-haiku-4-5": 2}
    assert summary.input_tokens == 1000 and summary.output_tokens == 150
    expected = (
        1000 * (estimate_cost(rows[0]["usage"], "claude-haiku-4-5") + estimate_cost(rows[1]["usage"], "claude-haiku-4-5")) / 2
    )
    assert summary.cost_per_1000_usd == pytest.approx(expected) and expected > 0
    assert summarize_llm_usage([rows[2]]) is None
    assert summarize_llm_usage([{**rows[0], "model": "no-such-model"}]).cost_per_1000_usd is None


AUTHORS_STYLE_EU = Path(__file__).parent / "data" / "authors_style" / "eu_ai_act_authors.jsonl"
OUT_OF_SCOPE_REFERENCE = (
    "This question can not be answered by the context. No sufficient information is provided in the context "
    "to answer this question."
)


def test_our_authors_style_eu_set_is_scored_like_the_authors_set():
    """Our EU AI Act set in the authors' generated style: every row reads as gold, uses the authors'
    question types, and each reference answer is written from its passages (context recall scores the
    reference answer's words against what retrieval returns, so a paraphrased reference would measure
    nothing)."""
    gold = read_gold(AUTHORS_STYLE_EU)
    rows = [json.loads(line) for line in AUTHORS_STYLE_EU.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(gold) == len(rows) == 80
    authors_types = {"simple", "complex", "double", "complex_situational", "situational", "distracting element",
                     "compare", "vague", "conversational", "rule_conclusion", "out of scope"}
    assert {g.question_type for g in gold.values()} == authors_types
    for row in rows:
        passages = [p.split(":", 1)[1] for p in row["reference_context"].split("\n\nDocument ")]
        assert row["reference_context"].startswith("Document ") and all(p.strip() for p in passages), row["id"]
        assert bool(row["conversation_history"]) == (row["metadata"]["question_type"] == "conversational"), row["id"]
        if row["metadata"]["question_type"] == "out of scope":
            assert row["reference_answer"] == OUT_OF_SCOPE_REFERENCE
            continue
        answer = content_word_set(row["reference_answer"])
        assert len(answer & content_word_set(" ".join(passages))) >= 0.6 * len(answer), row["id"]
