"""The deterministic offline query rewriter (core/rewriter.py)."""
from __future__ import annotations

import re

import pytest

from core.rewriter import OfflineRewriter, QueryRewriter, Rewrite
from core.types import Turn

HISTORY = [
    Turn("user", "What are the notice requirements for an automated employment decision tool?"),
    Turn("assistant", "Employers must notify candidates at least ten business days before use [1]."),
]

QUESTIONS = [
    "What is a bias audit, and what are the penalties?",
    "What does automated employment decision tool mean and how is it audited?",
    "I'm reviewing a policy document and came across the term bias audit. What does it require?",
    "Who must publish the results of a bias audit? Where must they be posted?",
    "What is a bias audit?",
    "Define independent auditor.",
    "How are impact ratios calculated and which categories must be reported?",
]


def key(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def test_follow_up_uses_the_previous_user_turn():
    rewriter: QueryRewriter = OfflineRewriter()
    out = rewriter.rewrite("What about the penalties?", HISTORY, 0)
    assert out == Rewrite(standalone=f"{HISTORY[0].content} What about the penalties?", sub_queries=[], model="offline")
    # The latest user turn, not an earlier one, and never the assistant's.
    history = [Turn("user", "What is a bias audit?"), *HISTORY]
    assert OfflineRewriter().rewrite("What are they?", history, 0).standalone.startswith(HISTORY[0].content)


def test_self_contained_question_and_no_history_stay_as_they_are():
    question = "What penalties apply to employers using an AEDT without a bias audit?"
    assert OfflineRewriter().rewrite(question, HISTORY, 0).standalone == question
    assert OfflineRewriter().rewrite("What are they?", [], 0).standalone == "What are they?"


def test_two_part_question_splits_into_two_parts():
    subs = OfflineRewriter().rewrite("What is a bias audit, and what are the penalties?", [], 3).sub_queries
    assert subs[0] == "What is a bias audit"
    assert "penalties" not in subs[0] and "penalties" in subs[1]
    assert subs[1].endswith("what are the penalties?")


def test_part_with_a_pronoun_gets_the_previous_parts_subject():
    subs = OfflineRewriter().rewrite(
        "What does automated employment decision tool mean and how is it audited?", [], 3
    ).sub_queries
    assert subs[0] == "What does automated employment decision tool mean"
    assert subs[1] == "automated employment decision tool how is it audited?"


def test_scene_setting_is_not_searched_on_its_own():
    subs = OfflineRewriter().rewrite(QUESTIONS[2], [], 3).sub_queries
    assert subs and all("bias audit" in s for s in subs)
    assert not any(s.lower().startswith("i'm reviewing") for s in subs)


@pytest.mark.parametrize("question", QUESTIONS)
def test_n_caps_the_sub_queries_and_zero_gives_none(question):
    rewriter = OfflineRewriter()
    assert rewriter.rewrite(question, [], 0).sub_queries == []
    assert rewriter.sub_queries(question, -1) == []
    for n in (1, 2, 3, 5):
        assert len(rewriter.rewrite(question, [], n).sub_queries) <= n


@pytest.mark.parametrize("question", QUESTIONS + ["What are they?", "And for employment agencies?"])
def test_sub_queries_never_equal_the_standalone_or_each_other(question):
    for history in ([], HISTORY):
        out = OfflineRewriter().rewrite(question, history, 5)
        keys = [key(s) for s in out.sub_queries]
        assert key(out.standalone) not in keys
        assert len(keys) == len(set(keys)) and all(keys)


def test_deterministic():
    first = [OfflineRewriter().rewrite(q, HISTORY, 3) for q in QUESTIONS]
    rewriter = OfflineRewriter()
    for _ in range(3):
        assert [rewriter.rewrite(q, HISTORY, 3) for q in QUESTIONS] == first
