"""What `hypa feedback report|export` compute from stored ratings (pure functions, no I/O).

A rating here is a rater's *current* 👍/👎 on an answer (removed ratings are not counted);
the append-only log keeps the history of changes.

A 👎's chosen reason (`reason_kind`) and an exchange's review state (`review_state`) are read from the
store's rows by `review_marks` alone: rows of a store without those columns give None, and the report
leaves "by reason" and the review state out instead of showing empty ones.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

from core.question_type import QUESTION_TYPES, classify_question
from core.types import Turn
from storage.sql.records import RatedAnswer, StoredAnswer

# Our question types that match a type of the eval dev set (shared/README.md); the rest are left
# for the reviewer to label.
_EVAL_QUESTION_TYPE = {"follow-up": "conversational", "compare": "compare", "multi-part": "double"}


@dataclass
class Tally:
    key: str
    up: int = 0
    down: int = 0
    answer_ids: set[str] = field(default_factory=set)

    @property
    def answers(self) -> int:
        return len(self.answer_ids)

    @property
    def net(self) -> int:
        return self.up - self.down

    @property
    def share_up(self) -> float:
        return self.up / (self.up + self.down) if self.up + self.down else 0.0

    def add(self, rated: RatedAnswer) -> None:
        self.answer_ids.add(rated.answer.id)
        if rated.rating > 0:
            self.up += 1
        else:
            self.down += 1


@dataclass(frozen=True)
class ReviewMarks:
    """What the review loop adds to a rating row: the 👎's chosen reason and the exchange's review."""

    reason_kind: str  # e.g. "wrong_provision"; "" when none was chosen
    review_state: str  # "pending" | "corrected" | "fine"; "" when nobody asked for a review


def review_marks(row: Any) -> ReviewMarks | None:
    """The row's reason kind and review state, or None when the store's rows do not have them (a
    store from before the review loop: then there is nothing to report, not an empty report)."""
    kind = getattr(row, "reason_kind", None)
    state = getattr(row, "review_state", None)
    if kind is None and state is None:
        return None
    return ReviewMarks(str(kind or ""), str(state or ""))


def reason_label(kind: str) -> str:
    """How a reason kind is shown: the review loop's own label (core/review.py) where it exists."""
    try:
        from core.review import reason_label as label  # type: ignore[import-not-found]
    except ImportError:  # the review loop is not in this build: show the kind in words
        return kind.replace("_", " ").capitalize()
    return label(kind)


NO_REASON = "(no reason chosen)"


@dataclass(frozen=True)
class AnswerScore:
    answer: StoredAnswer
    up: int
    down: int
    reasons: tuple[str, ...]  # the free-text reasons given
    # The chosen reason kinds of its 👎s and its review state; None when the store has no such fields.
    reason_kinds: tuple[str, ...] | None = None
    review_state: str | None = None

    @property
    def net(self) -> int:
        return self.up - self.down


@dataclass(frozen=True)
class FeedbackReview:
    ratings: int
    up: int
    down: int
    by_day: list[tuple[date, Tally]]
    by_complexity: list[Tally]
    by_question_type: list[Tally]
    worst: list[AnswerScore]  # answers with at least one 👎, lowest net score first
    # 👎s by chosen reason (most first); None when the store's rows carry no reason kind yet.
    by_reason: list[Tally] | None = None
    # The days the report covers, first to last (the plot's time axis): from the start of the period
    # (or the first rating) to today (or the last rating).
    first_day: date | None = None
    last_day: date | None = None


def complexity_label(answer: StoredAnswer) -> str:
    """The retrieval config and the complexity label it acted on, e.g. "pa-3class: 2"."""
    config = str(answer.record.params.get("config") or "default")
    label = answer.record.complexity
    return f"{config}: {'unclassified' if label is None else label}"


def question_type(answer: StoredAnswer) -> str:
    return classify_question(answer.record.question, in_thread=answer.record.history_turns > 0)


def review(
    rated: Sequence[RatedAnswer], worst: int = 10, *, since: date | None = None, today: date | None = None
) -> FeedbackReview:
    """`since`: the first day of the period asked for (None: all time); `today`: its last day."""
    by_day: dict[date, Tally] = {}
    by_complexity: dict[str, Tally] = {}
    by_type: dict[str, Tally] = {}
    by_reason: dict[str, Tally] | None = None
    per_answer: dict[str, list[RatedAnswer]] = defaultdict(list)
    for r in rated:
        marks = review_marks(r)
        if marks is not None:
            by_reason = {} if by_reason is None else by_reason
            if r.rating < 0:
                reason = reason_label(marks.reason_kind) if marks.reason_kind else NO_REASON
                by_reason.setdefault(reason, Tally(reason)).add(r)
        day = r.rated_at.date()
        by_day.setdefault(day, Tally(day.isoformat())).add(r)
        label = complexity_label(r.answer)
        by_complexity.setdefault(label, Tally(label)).add(r)
        qtype = question_type(r.answer)
        by_type.setdefault(qtype, Tally(qtype)).add(r)
        per_answer[r.answer.id].append(r)
    scores = [_score(rs) for rs in per_answer.values()]
    scores = sorted((s for s in scores if s.down), key=lambda s: (s.net, -s.down, s.answer.created_at))
    up = sum(r.rating > 0 for r in rated)
    days = sorted(by_day)
    first = min((d for d in (since, days[0] if days else None) if d is not None), default=None)
    last = max((d for d in (today, days[-1] if days else None) if d is not None), default=None)
    return FeedbackReview(
        ratings=len(rated),
        up=up,
        down=len(rated) - up,
        by_day=sorted(by_day.items()),
        by_complexity=sorted(by_complexity.values(), key=lambda t: t.key),
        by_question_type=sorted(by_type.values(), key=lambda t: QUESTION_TYPES.index(t.key)),  # type: ignore[arg-type]
        worst=scores[:worst],
        by_reason=None if by_reason is None else sorted(by_reason.values(), key=lambda t: (-t.down, t.key)),
        first_day=first,
        last_day=last,
    )


def _score(rs: Sequence[RatedAnswer]) -> AnswerScore:
    """One answer's ratings summed, with the reasons and review marks its raters left."""
    marked = [(r, m) for r in rs if (m := review_marks(r)) is not None]
    return AnswerScore(
        answer=rs[0].answer,
        up=sum(r.rating > 0 for r in rs),
        down=sum(r.rating < 0 for r in rs),
        reasons=tuple(r.reason for r in rs if r.reason),
        reason_kinds=tuple(m.reason_kind for r, m in marked if m.reason_kind and r.rating < 0) if marked else None,
        review_state=next((m.review_state for _, m in marked if m.review_state), "") if marked else None,
    )


def export_row(rated: RatedAnswer, history: Iterable[Turn]) -> dict:
    """One rated exchange as a JSONL row: the feedback fields plus the eval dataset's fields.

    `reference_answer` and `reference_context` are left empty for the reviewer to write (the bot's
    answer is never a reference); `metadata.question_type` is filled only where one of our types
    matches a dev-set type.
    """
    a = rated.answer
    ours = question_type(a)
    return {
        # Eval dataset fields (shared/data/eval format; `hypa eval run` reads id, question, history).
        "id": f"fb-{a.id}-{rated.rater}",
        "question": a.record.question,
        "conversation_history": [{"role": t.role, "content": t.content} for t in history],
        "reference_answer": "",
        "reference_context": "",
        "metadata": {
            "question_type": _EVAL_QUESTION_TYPE.get(ours, ""),
            "source": "hypa feedback export",
            "needs_review": True,
        },
        # Feedback fields.
        "answer_id": a.id,
        "platform": rated.platform,
        "rater": rated.rater,
        "rating": rated.rating,
        "reason": rated.reason,
        "feedback_source": rated.source,
        "rated_at": rated.rated_at.isoformat(),
        "answer": a.record.text,
        "citations": [asdict(c) for c in a.record.citations],
        "refused": a.record.refused,
        "outcome": a.record.outcome,
        "note": a.record.note,
        "standalone_question": a.record.standalone_question,
        "question_kind": ours,
        "complexity": a.record.complexity,
        "retrieval": a.record.params,
        "chunk_ids": a.record.chunk_ids,
        "model": a.record.model,
        "collection": a.record.collection,
        "answered_at": a.created_at.isoformat(),
    }
