"""What `hypa feedback report|export` compute from stored ratings (pure functions, no I/O).

A rating here is a rater's *current* 👍/👎 on an answer (removed ratings are not counted);
the append-only log keeps the history of changes.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date

from core.conversation_store import RatedAnswer, StoredAnswer
from core.question_type import QUESTION_TYPES, classify_question
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
    reasons: tuple[str, ...]

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


def complexity_label(answer: StoredAnswer) -> str:
    """The retrieval config and the complexity label it acted on, e.g. "pa-3class: 2"."""
    config = str(answer.record.params.get("config") or "default")
    label = answer.record.complexity
    return f"{config}: {'unclassified' if label is None else label}"


def question_type(answer: StoredAnswer) -> str:
    return classify_question(answer.record.question, in_thread=answer.record.history_turns > 0)


def review(rated: Sequence[RatedAnswer], worst: int = 10) -> FeedbackReview:
    by_day: dict[date, Tally] = {}
    by_complexity: dict[str, Tally] = {}
    by_type: dict[str, Tally] = {}
    per_answer: dict[str, list[RatedAnswer]] = defaultdict(list)
    for r in rated:
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
            reasons=tuple(r.reason for r in rs if r.reason),
        )
        for rs in per_answer.values()
    ]
    scores = sorted((s for s in scores if s.down), key=lambda s: (s.net, -s.down, s.answer.created_at))
    up = sum(r.rating > 0 for r in rated)
    return FeedbackReview(
        ratings=len(rated),
        up=up,
        down=len(rated) - up,
        by_day=sorted(by_day.items()),
        by_complexity=sorted(by_complexity.values(), key=lambda t: t.key),
        by_question_type=sorted(by_type.values(), key=lambda t: QUESTION_TYPES.index(t.key)),
        worst=scores[:worst],
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
