"""Scores for user-style question sets: plain-language questions with a checkable gold.

A user-style gold row has `answerable`, `kind`, `evidence` (verbatim spans of the provision that
answers, all needed) and `must_include` (groups of short key facts; an answer must state one
alternative of every group). The scores, over answerable rows unless said otherwise:

* **prov** (provision recall): every evidence span occurs in the retrieved contexts;
* **facts** (fact recall): the answer is not a refusal and states every must_include group;
* **cited**: some citation's quote overlaps an evidence span (40 folded characters in common, or one
  contains the other);
* **fr** (false refusals): answerable questions refused; **oos**: unanswerable questions refused;
* **ctxtok**: 1.3 x the words of the contexts (a tokenizer-free count, the same for every system);
* **awords**: words of the answers that are not refusals.

Text is *folded* before matching: lower-cased, letters and digits only, so PDF line breaks,
punctuation and quote styles do not matter. Folding, the refusal test and every definition follow
`../shared/tools/user-set` exactly, so the two tools print the same numbers for the same files
(tests/test_eval_user_style.py checks it when that tool is present).
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import DatasetError
from core.eval.report import read_results

_NOT_FOLDED = re.compile(r"[^0-9a-zà-ỹ]+")
# The scorer's own refusal markers, besides `refused: true` and an empty answer.
_REFUSAL_MARKERS = ("don't address", "do not address")
OVERLAP_CHARS = 40
WORDS_TO_TOKENS = 1.3
METRICS = ("prov", "facts", "cited", "oos", "fr", "ctxtok", "awords")


def fold(text: str | None) -> str:
    text = (text or "").lower().replace("ﬁ", "fi").replace("ﬂ", "fl")
    return _NOT_FOLDED.sub("", text)


def is_user_style(rows: Sequence[dict]) -> bool:
    """A gold set is user-style when its rows say whether they are answerable and carry evidence."""
    return bool(rows) and all("answerable" in r and "evidence" in r for r in rows)


def is_refusal(prediction: dict) -> bool:
    if prediction.get("refused") is True:
        return True
    answer = (prediction.get("answer") or "").lower()
    return not answer.strip() or answer.startswith("not_covered") or any(m in answer for m in _REFUSAL_MARKERS)


def overlaps(a: str, b: str, n: int = OVERLAP_CHARS) -> bool:
    """Folded strings share `n` characters (one window every 10 of `a`), or one contains the other."""
    if not a or not b:
        return False
    if a in b or b in a:
        return True
    return any(a[i : i + n] in b for i in range(0, max(1, len(a) - n + 1), 10))


@dataclass(frozen=True)
class RowScore:
    id: str
    kind: str
    answerable: bool
    missing: bool
    refused: bool
    answer_words: int
    context_tokens: float
    prov: bool | None = None  # None for unanswerable rows
    facts: bool | None = None
    cited: bool | None = None


def score_row(gold: dict, prediction: dict | None) -> RowScore:
    missing = prediction is None
    p = prediction or {"answer": "", "contexts": []}
    contexts = p.get("contexts") or []
    answerable = bool(gold.get("answerable"))
    refused = is_refusal(p)
    base: dict[str, Any] = dict(
        id=str(gold["id"]),
        kind=str(gold.get("kind")),
        answerable=answerable,
        missing=missing,
        refused=refused,
        answer_words=len((p.get("answer") or "").split()),
        context_tokens=WORDS_TO_TOKENS * sum(len((c.get("text") or "").split()) for c in contexts),
    )
    if not answerable:
        return RowScore(**base)
    context = fold(" ".join(c.get("text", "") for c in contexts))
    answer = fold(p.get("answer"))
    evidence = [fold(e) for e in gold.get("evidence") or []]
    quotes = [fold(c.get("quote")) for c in p.get("citations") or []]
    return RowScore(
        **base,
        prov=all(e in context for e in evidence),
        facts=(not refused) and all(any(fold(a) in answer for a in group) for group in gold.get("must_include") or []),
        cited=any(overlaps(q, e) for q in quotes for e in evidence),
    )


@dataclass(frozen=True)
class Summary:
    name: str
    n: int
    missing: int
    prov: float | None
    facts: float | None
    cited: float | None
    oos: float | None  # unanswerable refused
    fr: float | None  # answerable refused
    ctxtok: float | None
    awords: float | None
    n_answerable: int = 0
    n_unanswerable: int = 0


def _mean(values: Sequence[float | bool]) -> float | None:
    return statistics.mean(values) if values else None


def summarise(name: str, rows: Sequence[RowScore]) -> Summary:
    answerable = [r for r in rows if r.answerable]
    unanswerable = [r for r in rows if not r.answerable]
    return Summary(
        name=name,
        n=len(rows),
        missing=sum(r.missing for r in rows),
        prov=_mean([bool(r.prov) for r in answerable]),
        facts=_mean([bool(r.facts) for r in answerable]),
        cited=_mean([bool(r.cited) for r in answerable]),
        oos=_mean([r.refused for r in unanswerable]),
        fr=_mean([r.refused for r in answerable]),
        ctxtok=_mean([r.context_tokens for r in answerable]),
        awords=_mean([r.answer_words for r in answerable if not r.refused]),
        n_answerable=len(answerable),
        n_unanswerable=len(unanswerable),
    )


@dataclass
class UserStyleReport:
    results_path: str
    gold_path: str
    overall: Summary
    by_kind: list[Summary]
    rows: list[RowScore] = field(default_factory=list)
    unknown_ids: list[str] = field(default_factory=list)  # results without a gold row


def read_user_gold(path: str | Path) -> list[dict]:
    rows = read_results(path)  # the same JSONL reader, with path:line errors
    if not is_user_style(rows):
        raise DatasetError(f"{path}: not a user-style set (every row needs 'answerable' and 'evidence')")
    return rows


def build_user_report(results_path: str | Path, gold_path: str | Path) -> UserStyleReport:
    gold = read_user_gold(gold_path)
    predictions = {str(p["id"]): p for p in read_results(results_path)}
    rows = [score_row(g, predictions.get(str(g["id"]))) for g in gold]
    kinds = sorted({r.kind for r in rows})
    gold_ids = {str(g["id"]) for g in gold}
    return UserStyleReport(
        results_path=str(results_path),
        gold_path=str(gold_path),
        overall=summarise("all", rows),
        by_kind=[summarise(k, [r for r in rows if r.kind == k]) for k in kinds],
        rows=rows,
        unknown_ids=sorted(set(predictions) - gold_ids),
    )


# ----------------------------------------------------------------------------------------- render
_HEADER = ("kind", "n", "prov", "facts", "cited", "false refusals", "unanswerable refused", "ctx tok", "answer words")


def _cells(s: Summary) -> list[str]:
    def rate(v: float | None) -> str:
        return "—" if v is None else f"{v:.3f}"

    def count(v: float | None) -> str:
        return "—" if v is None else f"{v:,.0f}"

    return [
        s.name,
        str(s.n),
        rate(s.prov),
        rate(s.facts),
        rate(s.cited),
        rate(s.fr),
        rate(s.oos),
        count(s.ctxtok),
        count(s.awords),
    ]


def render_user_markdown(report: UserStyleReport) -> str:
    lines = [
        f"Results: `{Path(report.results_path).name}`, gold: `{Path(report.gold_path).name}` "
        f"({report.overall.n_answerable} answerable, {report.overall.n_unanswerable} unanswerable)",
        "",
        "| " + " | ".join(_HEADER) + " |",
        "| " + " | ".join("---" for _ in _HEADER) + " |",
    ]
    for s in [report.overall, *report.by_kind]:
        lines.append("| " + " | ".join(_cells(s)) + " |")
    if report.overall.missing:
        lines.append(f"\n{report.overall.missing} gold rows have no result (scored as empty answers).")
    return "\n".join(lines)


def render_user_rich(report: UserStyleReport, console) -> None:  # noqa: ANN001 - rich.console.Console
    from rich.table import Table

    table = Table(
        title=f"User-style set {Path(report.gold_path).name}: {report.overall.n_answerable} answerable, "
        f"{report.overall.n_unanswerable} unanswerable"
    )
    for name in ("kind", "n", "prov", "facts", "cited", "fr", "oos", "ctx tok", "words"):
        table.add_column(name, justify="left" if name == "kind" else "right")
    for i, s in enumerate([report.overall, *report.by_kind]):
        table.add_row(*_cells(s), end_section=i == 0)
    console.print(table)
    console.print(
        "prov = every evidence span in the contexts; facts = every key fact in a non-refused answer; "
        "cited = a citation quote overlaps the evidence; fr = answerable questions refused; "
        "oos = unanswerable questions refused; ctx tok = 1.3 x context words; words = answer words."
    )
    if report.overall.missing:
        console.print(f"[yellow]{report.overall.missing} gold rows have no result (scored as empty answers).[/]")
    if report.unknown_ids:
        console.print(f"[yellow]{len(report.unknown_ids)} result rows are not in the gold set.[/]")
