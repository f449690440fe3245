"""The human review loop's values, shared by the Slack and Telegram adapters, the store and the CLI
(no I/O here).

A 👎 comes with a reason: one of REASON_KINDS plus free text. A 👎 with its reason, or a press of
"Ask a person", asks for a review of the exchange; a reviewer settles it in the review channel as
"fine" or "corrected" (with the correct answer and the provision it rests on, the exchange's
reference answer for `hypa eval`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from core.types import Citation

# Stored in feedback.reason_kind; the labels are what people choose from.
REASON_KINDS: dict[str, str] = {
    "wrong_provision": "Wrong provision cited",
    "incomplete": "Incomplete",
    "outdated": "Outdated or misread",
    "not_covered": "Should have said “not covered”",
    "other": "Other",
}

ReviewState = Literal["pending", "corrected", "fine"]
RequestKind = Literal["downvote", "ask_person"]
Verdict = Literal["corrected", "fine"]

# Words in a written reason (Telegram has no choice list) that name a kind; first match wins.
_KIND_WORDS = (
    ("not_covered", re.compile(r"\bnot (?:be )?covered\b|\bout of scope\b|\bshould have said\b", re.I)),
    ("wrong_provision", re.compile(r"\bwrong (?:provision|article|section|rule|citation|source)s?\b", re.I)),
    ("outdated", re.compile(r"\boutdated\b|\bmisread\b|\bold version\b|\bno longer\b", re.I)),
    ("incomplete", re.compile(r"\bincomplete\b|\bmissing\b|\bleft out\b|\bonly part\b", re.I)),
)


def reason_kind_of(text: str) -> str:
    """The kind a written reason names ("Wrong provision: …" -> wrong_provision), else "other"."""
    for kind, words in _KIND_WORDS:
        if words.search(text):
            return kind
    return "other"


def reason_label(kind: str) -> str:
    return REASON_KINDS.get(kind, kind)


def described_reason(kind: str, text: str) -> str:
    """"Incomplete: misses the notice period" — the kind's label and the words, whichever are given."""
    label = REASON_KINDS.get(kind, "") if kind else ""
    if label and text:
        return f"{label}: {text}"
    return label or text


@dataclass(frozen=True)
class Review:
    """The review of one exchange."""

    answer_id: str
    state: ReviewState
    requested_by: str
    request_kind: str
    requested_at: datetime
    requests: int = 1
    reviewer: str | None = None
    reviewed_at: datetime | None = None
    reference_answer: str = ""
    reference_provision: str = ""
    correction_posted: bool = False


@dataclass(frozen=True)
class Exchange:
    """One question and the bot's answer, with where it was asked: what a review post shows and what a
    correction or a shared answer is posted back to."""

    answer_id: str
    platform: str
    workspace: str
    channel: str
    thread: str  # Slack thread ts (or "cmd:…" for a slash command), Telegram reply-chain root
    message_id: str  # the question's platform id
    asker: str
    question: str
    standalone_question: str
    answer: str
    citations: list[Citation] = field(default_factory=list)
    refused: bool = False
    note: str = ""
    review: Review | None = None


@dataclass(frozen=True)
class ReplyPromptRecord:
    """A bot message waiting for a written reply (Telegram ForceReply): a 👎's reason or a correction."""

    platform: str
    channel: str
    prompt_id: str
    purpose: Literal["reason", "correction"]
    answer_id: str
    user: str
    act_order: int = 0  # a reason: the position of the 👎 act it belongs to
    review_post_id: str = ""  # a correction: the review post it was asked from


def parse_correction(text: str) -> tuple[str, str]:
    """(answer, provision) from a reviewer's written correction: a line "Provision: Art. 99(3)" (or
    "Provision - …") names the provision, the rest is the answer."""
    provision = ""
    lines = []
    for line in text.strip().splitlines():
        match = re.match(r"\s*(?:provision|source|article)s?\s*[:\-–]\s*(.+)", line, re.I)
        if match and not provision:
            provision = match.group(1).strip()
        else:
            lines.append(line)
    return "\n".join(lines).strip(), provision
