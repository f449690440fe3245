"""User-style scoring (core/eval/user_style.py) and the study/measure split (core/eval/split.py)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.errors import DatasetError
from core.eval.split import group_ids, part_of, split_dataset
from core.eval.user_style import build_user_report, fold, is_refusal, is_user_style, overlaps, render_user_markdown

SHARED = Path(__file__).resolve().parents[2] / "shared"
USER_SET_TOOL = SHARED / "tools" / "user-set"

GOLD = [
    {  # retrieved, answered with both facts, quoted
        "id": "q1", "collection": "x", "question": "How soon must candidates be told?", "conversation_history": [],
        "answerable": True, "kind": "deadline", "gold_provisions": ["§ 1(a)"],
        "evidence": ["at least ten business days before the use of such tool"],
        "must_include": [["10 business days", "ten business days"], ["notice", "notify"]],
        "reference_answer": "Ten business days (§ 1(a)).",
    },
    {  # retrieved but refused: a false refusal, no facts
        "id": "q2", "collection": "x", "question": "Who audits?", "conversation_history": [],
        "answerable": True, "kind": "definition", "gold_provisions": ["§ 2"],
        "evidence": ["an independent auditor means a person or group"],
        "must_include": [["independent auditor"]], "reference_answer": "An independent auditor.",
    },
    {  # not retrieved; answered with the fact anyway (from memory of another chunk)
        "id": "q3", "collection": "x", "question": "What is the fine?", "conversation_history": [],
        "answerable": True, "kind": "penalty", "gold_provisions": ["§ 3"],
        "evidence": ["not more than $500 for a first violation"],
        "must_include": [["$500", "500"]], "reference_answer": "$500.",
    },
    {  # unanswerable, refused by marker text
        "id": "q4", "collection": "x", "question": "Is there a fee?", "conversation_history": [],
        "answerable": False, "kind": "not-covered", "gold_provisions": [], "evidence": [], "must_include": [],
        "reference_answer": "Not addressed.",
    },
    {  # unanswerable, answered; and no prediction row at all for q6
        "id": "q5", "collection": "x", "question": "Which agency in Spain?", "conversation_history": [],
        "answerable": False, "kind": "not-covered", "gold_provisions": [], "evidence": [], "must_include": [],
        "reference_answer": "Not addressed.",
    },
    {
        "id": "q6", "collection": "x", "question": "Missing?", "conversation_history": [],
        "answerable": True, "kind": "penalty", "gold_provisions": ["§ 3"],
        "evidence": ["not more than $1,500 for each subsequent violation"],
        "must_include": [["$1,500"]], "reference_answer": "$1,500.",
    },
]
PREDICTIONS = [
    {"id": "q1", "answer": "Under § 1(a): notice at least ten business days before use. [1]", "refused": False,
     "contexts": [{"text": "Notice must be given at least ten business\ndays before the use of such tool."}],
     "citations": [{"quote": "at least ten business days before the use of such tool"}]},
    {"id": "q2", "answer": "The loaded regulations don't address this question.", "refused": True,
     "contexts": [{"text": "An “independent auditor” means a person or group that is capable."}], "citations": []},
    {"id": "q3", "answer": "Up to $500 [1]", "refused": False,
     "contexts": [{"text": "Penalties apply."}], "citations": [{"quote": "Penalties apply."}]},
    {"id": "q4", "answer": "The loaded regulations don't address this question.", "refused": False,
     "contexts": [], "citations": []},
    {"id": "q5", "answer": "Under § 9 ... [1]", "refused": False, "contexts": [{"text": "one two three"}],
     "citations": []},
]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_fold_and_overlap_follow_the_scorer():
    assert fold("An “Independent\nAuditor” — ﬁne.") == "anindependentauditorfine"
    assert overlaps("a" * 10, "xxaaaaaaaaaaxx")  # contained
    assert overlaps("abcdefghij" * 5, "zz" + ("abcdefghij" * 5)[5:50])  # 40 characters in common
    assert not overlaps("abcdefghij" * 5, "abcdefghij"[:5] + "z" * 60)  # 5 in common, not 40
    assert not overlaps("", "abc")
    assert is_refusal({"answer": "", "refused": False})
    assert is_refusal({"answer": "They do not address it.", "refused": False})
    assert not is_refusal({"answer": "Under § 1 ...", "refused": False})


def test_scores_by_hand(tmp_path):
    gold = _write(tmp_path / "gold.jsonl", GOLD)
    pred = _write(tmp_path / "pred.jsonl", PREDICTIONS)
    report = build_user_report(pred, gold)
    s = report.overall
    assert (s.n, s.missing, s.n_answerable, s.n_unanswerable) == (6, 1, 4, 2)
    assert s.prov == pytest.approx(2 / 4)  # q1, q2 (folding joins the line break and the quotes)
    assert s.facts == pytest.approx(2 / 4)  # q1, q3; q2 refused, q6 missing
    assert s.cited == pytest.approx(1 / 4)  # q1 only
    assert s.fr == pytest.approx(2 / 4)  # q2 refused, q6 missing = empty answer = refusal
    assert s.oos == pytest.approx(1 / 2)  # q4 by its text, q5 answered
    assert s.ctxtok == pytest.approx(1.3 * (15 + 11 + 2 + 0) / 4)
    assert s.awords == pytest.approx((12 + 4) / 2)
    by_kind = {k.name: k for k in report.by_kind}
    assert by_kind["penalty"].facts == pytest.approx(0.5) and by_kind["not-covered"].oos == pytest.approx(0.5)
    table = render_user_markdown(report)
    assert "| all | 6 | 0.500 | 0.500 | 0.250 | 0.500 | 0.500 |" in table
    assert "1 gold rows have no result" in table


@pytest.mark.skipif(not USER_SET_TOOL.is_file(), reason=f"the reference scorer {USER_SET_TOOL} is not here")
def test_numbers_agree_with_the_reference_scorer(tmp_path):
    gold = _write(tmp_path / "gold.jsonl", GOLD)
    pred = _write(tmp_path / "pred.jsonl", PREDICTIONS)
    ours = build_user_report(pred, gold).overall
    done = subprocess.run(
        [sys.executable, str(USER_SET_TOOL), "score", str(gold), f"ours={pred}", "--json", str(tmp_path / "s.json")],
        capture_output=True, text=True, check=True,
    )
    theirs = json.loads((tmp_path / "s.json").read_text())["ours"]
    for metric in ("prov", "facts", "cited", "oos", "fr", "ctxtok", "awords"):
        assert getattr(ours, metric) == pytest.approx(theirs[metric]), (metric, done.stdout)
    assert ours.missing == theirs["missing"]


def test_cli_report_detects_a_user_style_set(tmp_path):
    gold = _write(tmp_path / "gold.jsonl", GOLD)
    pred = _write(tmp_path / "pred.jsonl", PREDICTIONS)
    result = CliRunner().invoke(app, ["eval", "report", str(pred), "--gold", str(gold), "--markdown"])
    assert result.exit_code == 0, result.output
    assert "| all | 6 | 0.500 | 0.500 | 0.250 | 0.500 | 0.500 |" in result.output
    assert "| not-covered | 2 |" in result.output


def test_a_set_without_evidence_is_not_user_style(tmp_path):
    assert not is_user_style([{"id": 1, "question": "q", "reference_answer": "a"}])
    assert not is_user_style([])
    with pytest.raises(DatasetError, match="not a user-style set"):
        build_user_report(_write(tmp_path / "p.jsonl", PREDICTIONS), _write(tmp_path / "g.jsonl", [{"id": 1}]))


# --------------------------------------------------------------------------------------------- split
def test_split_is_stable_keeps_follow_ups_with_their_question_and_loses_nothing(tmp_path):
    rows = [{"id": f"r{i}", "question": f"Question {i}?", "conversation_history": []} for i in range(40)]
    rows.append({
        "id": "f1", "question": "And for agencies?",
        "conversation_history": [{"role": "user", "content": "Question 7?"}, {"role": "assistant", "content": "Yes."}],
    })
    assert group_ids(rows)[-1] == "r7"
    src = _write(tmp_path / "set.jsonl", rows)
    first = split_dataset(src, tmp_path / "a")
    _write(tmp_path / "reordered.jsonl", list(reversed(rows)))
    second = split_dataset(tmp_path / "reordered.jsonl", tmp_path / "b")

    def ids(path: Path) -> set[str]:
        return {json.loads(line)["id"] for line in path.read_text().splitlines()}

    study, measure = ids(first.study), ids(first.measure)
    assert study | measure == {r["id"] for r in rows} and not study & measure
    assert 10 <= len(study) <= 31  # both parts are real parts
    assert ids(second.study) == study  # the file's order does not matter
    assert ("f1" in study) == ("r7" in study)
    assert all(part_of(r["id"]) == ("study" if r["id"] in study else "measure") for r in rows[:40])


def test_split_cli_reports_a_bad_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\nnot json\n')
    result = CliRunner().invoke(app, ["eval", "split", str(bad), "--out-dir", str(tmp_path / "o")])
    assert result.exit_code != 0
    assert re.search(r"bad\.jsonl:2:\s+invalid JSON", result.output)
