"""What `hypa feedback report|export` compute from stored ratings (pure functions, no I/O).

A rating here is a rater's *current* 👍/👎 on an answer (removed ratings are not counted);
the append-only log keeps the history of changes.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date

from core.conversation_store import RatedAnswer, ReviewedAnswer, StoredAnswer
from core.question_type import QUESTION_TYPES, classify_question
from core.review import described_reason, reason_label
from core.types import Turn

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
class AnswerScore:
    answer: StoredAnswer
    up: int
    down: int
    reasons: tuple[str, ...]  # "Incomplete: misses agencies" (the reason's kind and words)
    review_state: str = ""  # pending | corrected | fine; "" when nobody asked for a review

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
    # 👎s by the kind of reason given (core/review.py labels; "(no reason)" for reactions and skipped
    # modals), most frequent first.
    by_reason: list[Tally] = field(default_factory=list)
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
    per_answer: dict[str, list[RatedAnswer]] = defaultdict(list)
    by_reason: dict[str, Tally] = {}
    for r in rated:
        if r.rating < 0:
            kind = reason_label(r.reason_kind or "other") if (r.reason_kind or r.reason) else "(no reason)"
            by_reason.setdefault(kind, Tally(kind)).add(r)
        day = r.rated_at.date()
        by_day.setdefault(day, Tally(day.isoformat())).add(r)
        label = complexity_label(r.answer)
        by_complexity.setdefault(label, Tally(label)).add(r)
        qtype = question_type(r.answer)
        by_type.setdefault(qtype, Tally(qtype)).add(r)
        per_answer[r.answer.id].append(r)
    scores = [
        AnswerScore(
            answer=rs[0].answer,
            up=sum(r.rating > 0 for r in rs),
            down=sum(r.rating < 0 for r in rs),
            reasons=tuple(described_reason(r.reason_kind, r.reason) for r in rs if r.reason or r.reason_kind),
            review_state=rs[0].review_state,
        )
        for rs in per_answer.values()
    ]
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
        by_question_type=sorted(by_type.values(), key=lambda t: QUESTION_TYPES.index(t.key)),
        worst=scores[:worst],
        by_reason=sorted(by_reason.values(), key=lambda t: (-t.down, t.key)),
        first_day=first,
        last_day=last,
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
        "reason_kind": rated.reason_kind,
        "review_state": rated.review_state,
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


def reviewed_row(reviewed: ReviewedAnswer, history: Iterable[Turn]) -> dict:
    """A reviewed exchange as an eval dataset row: a regression case for `hypa eval run` / `report`.

    A correction's reference is the reviewer's answer, with the provision it rests on as
    `gold_provisions`; an answer marked fine is its own reference (a reviewer confirmed it), with the
    provisions it cited.
    """
    a, review = reviewed.answer, reviewed.review
    corrected = review.state == "corrected"
    ours = question_type(a)
    provisions = [review.reference_provision] if corrected and review.reference_provision else (
        [] if corrected else list(dict.fromkeys(c.label for c in a.record.citations))
    )
    return {
        # Eval dataset fields (`hypa eval run` reads id, question, conversation_history; `report` the rest).
        "id": f"rv-{a.id}",
        "question": a.record.question,
        "conversation_history": [{"role": t.role, "content": t.content} for t in history],
        "reference_answer": review.reference_answer if corrected else a.record.text,
        "reference_context": "",
        "gold_provisions": provisions,
        "collection": a.record.collection,
        "metadata": {
            "question_type": _EVAL_QUESTION_TYPE.get(ours, ""),
            "source": "hypa feedback export --reviewed",
            "needs_review": False,
            "review": review.state,  # corrected | fine
        },
        # Review fields.
        "answer_id": a.id,
        "platform": a.platform,
        "review_state": review.state,
        "reviewer": review.reviewer,
        "reviewed_at": review.reviewed_at.isoformat() if review.reviewed_at else None,
        "reference_provision": review.reference_provision if corrected else "",
        "requested_by": review.requested_by,
        "request_kind": review.request_kind,
        "requests": review.requests,
        "correction_posted": review.correction_posted,
        "reasons": [{"reason_kind": kind, "reason": text} for kind, text in reviewed.reasons],
        "answer": a.record.text,
        "citations": [asdict(c) for c in a.record.citations],
        "refused": a.record.refused,
        "standalone_question": a.record.standalone_question,
        "question_kind": ours,
        "answered_at": a.created_at.isoformat(),
    }
