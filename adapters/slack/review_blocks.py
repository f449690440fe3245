"""Block Kit for the review loop (no I/O): the 👎 reason modal, the post in the review channel, the
reviewer's correction modal, and what a settled review post shows.

Modals carry what their submission needs in `private_metadata` (JSON, at most 3,000 characters;
Slack returns it unchanged in the signed `view_submission`), so no state is kept between the click
and the submission.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from adapters.slack.blocks import SECTION_CHARS, SlackMessage, source_lines
from adapters.slack.text import answer_mrkdwn, escape_mrkdwn
from core.conversation import Reply
from core.review import REASON_KINDS, Exchange, Review

VIEW_REASON = "downvote_reason"  # callback_id of the 👎 reason modal
VIEW_CORRECTION = "review_correction"  # callback_id of the reviewer's modal
ACTION_REVIEW_CORRECT = "review_correct"  # "Write the correct answer"
ACTION_REVIEW_FINE = "review_fine"  # "Answer is fine"
REVIEW_ACTIONS_BLOCK = "review"

# block_id / action_id of the modals' inputs (read back from view.state.values)
REASON_KIND_INPUT = ("reason_kind", "choice")
REASON_TEXT_INPUT = ("reason_text", "text")
CORRECT_ANSWER_INPUT = ("correct_answer", "text")
PROVISION_INPUT = ("provision", "text")
POST_IN_THREAD_INPUT = ("post_in_thread", "choice")
POST_IN_THREAD = "post"

MAX_REASON_INPUT = 1000
MAX_ANSWER_INPUT = 3000  # Slack's limit for a plain_text_input
_QUOTED_ANSWER_CHARS = 2000


@dataclass(frozen=True)
class ReasonForm:
    """The 👎 the reason modal was opened for."""

    answer_id: str
    channel: str  # where the answer (and the button) is
    order: int  # the click's position on Slack's clock: the reason joins that act
    thread: str = ""  # where to thank the rater ("" for a private answer)


@dataclass(frozen=True)
class CorrectionForm:
    """The review post the correction modal was opened from."""

    answer_id: str
    channel: str  # the review channel
    message_ts: str  # the review post, updated once the review is settled


def _plain(text: str) -> dict:
    return {"type": "plain_text", "text": text, "emoji": True}


def _section(mrkdwn: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn[:SECTION_CHARS]}}


def _context(mrkdwn: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn[:SECTION_CHARS]}]}


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _quoted(text: str) -> str:
    return "\n".join("> " + line for line in text.splitlines() or [""])


# --- the 👎 reason modal ----------------------------------------------------------------------------


def reason_modal(form: ReasonForm) -> dict:
    """views.open payload: what was wrong (one choice) and a few words (optional)."""
    options = [{"text": _plain(label), "value": kind} for kind, label in REASON_KINDS.items()]
    return {
        "type": "modal",
        "callback_id": VIEW_REASON,
        "private_metadata": json.dumps({"a": form.answer_id, "c": form.channel, "o": form.order, "t": form.thread}),
        "title": _plain("What was wrong?"),
        "submit": _plain("Send"),
        "close": _plain("Skip"),
        "blocks": [
            _section("Thanks for the 👎. Telling us what was wrong sends the answer to a reviewer."),
            {
                "type": "input", "block_id": REASON_KIND_INPUT[0], "label": _plain("The answer…"),
                "element": {"type": "radio_buttons", "action_id": REASON_KIND_INPUT[1], "options": options},
            },
            {
                "type": "input", "block_id": REASON_TEXT_INPUT[0], "optional": True, "label": _plain("Details"),
                "element": {
                    "type": "plain_text_input", "action_id": REASON_TEXT_INPUT[1], "multiline": True,
                    "max_length": MAX_REASON_INPUT,
                    "placeholder": _plain("e.g. it cites Art. 5, but Art. 6 applies"),
                },
            },
        ],
    }


def read_reason_form(view: dict) -> ReasonForm | None:
    try:
        meta = json.loads(view.get("private_metadata") or "{}")
        return ReasonForm(str(meta["a"]), str(meta["c"]), int(meta["o"]), str(meta.get("t") or ""))
    except (ValueError, KeyError, TypeError):
        return None


def read_reason(view: dict) -> tuple[str, str]:
    """(kind, text) as submitted; kind "" when none was chosen, or one not offered."""
    values = (view.get("state") or {}).get("values") or {}
    choice = ((values.get(REASON_KIND_INPUT[0]) or {}).get(REASON_KIND_INPUT[1]) or {}).get("selected_option") or {}
    kind = str(choice.get("value")) if choice.get("value") in REASON_KINDS else ""
    text = ((values.get(REASON_TEXT_INPUT[0]) or {}).get(REASON_TEXT_INPUT[1]) or {}).get("value") or ""
    return kind, text.strip()[:MAX_REASON_INPUT]


# --- the review post ---------------------------------------------------------------------------


def _reply_of(exchange: Exchange) -> Reply:
    return Reply(answer_id=exchange.answer_id, text=exchange.answer, citations=exchange.citations,
                 refused=exchange.refused, note=exchange.note)


def review_post(
    exchange: Exchange, *, requester: str, kind: str, reason: str = "", thread_link: str | None = None
) -> SlackMessage:
    """What the review channel gets for a 👎 with its reason (`kind` "downvote") or an "Ask a person"
    press: the question (and the standalone question), the answer, its sources, the reason, who
    asked, a link to the thread, and the reviewer's two buttons."""
    what = "👎 with a reason" if kind == "downvote" else "🙋 Ask a person"
    where = f"<#{exchange.channel}>" if exchange.channel.startswith(("C", "G")) else "a direct message"
    private = exchange.thread.startswith("cmd:")
    blocks = [_section(f"*{what}* from <@{requester}> in {where}{' (a private /hypa answer)' if private else ''}")]
    blocks.append(_section("*Question*\n" + _quoted(escape_mrkdwn(_shorten(exchange.question, 1500)))))
    if exchange.standalone_question.strip() and exchange.standalone_question.strip() != exchange.question.strip():
        blocks.append(_context("*Standalone question:* " + escape_mrkdwn(_shorten(exchange.standalone_question, 1500))))
    blocks.append(_section("*Answer*\n" + answer_mrkdwn(_shorten(exchange.answer, _QUOTED_ANSWER_CHARS))))
    lines = source_lines(_reply_of(exchange))
    if lines:
        blocks.append(_section("*Sources*\n" + _shorten("\n".join(lines), SECTION_CHARS - 20)))
    if kind == "downvote":
        blocks.append(_section("*Reason:* " + (escape_mrkdwn(_shorten(reason, 1500)) or "_(none given)_")))
    link = f" · <{thread_link}|Open the thread>" if thread_link else ""
    blocks.append(_context(f"Asked by <@{exchange.asker}>{link} · answer id `{exchange.answer_id}`"))
    if exchange.review is not None and exchange.review.state != "pending":
        blocks.append(_context(settled_text(exchange.review) + " (earlier)"))
    blocks.append({
        "type": "actions",
        "block_id": REVIEW_ACTIONS_BLOCK,
        "elements": [
            {"type": "button", "action_id": ACTION_REVIEW_CORRECT, "style": "primary", "value": exchange.answer_id,
             "text": _plain("Write the correct answer")},
            {"type": "button", "action_id": ACTION_REVIEW_FINE, "value": exchange.answer_id,
             "text": _plain("Answer is fine")},
        ],
    })
    text = f"{what}: {_shorten(exchange.question, 200)}"
    return SlackMessage(text=escape_mrkdwn(text), blocks=blocks)


def settled_text(review: Review) -> str:
    who = f"<@{review.reviewer}>" if review.reviewer else "a reviewer"
    if review.state == "fine":
        return f"✅ Marked fine by {who}"
    provision = f" (rests on {escape_mrkdwn(review.reference_provision)})" if review.reference_provision else ""
    posted = "; posted in the thread" if review.correction_posted else ""
    return f"✏️ Corrected by {who}{provision}{posted}"


def settled_post(blocks: list[dict], review: Review) -> list[dict]:
    """The review post once settled: the reviewer's buttons replaced by who settled it and how (and,
    for a correction, the reference answer)."""
    kept = [b for b in blocks if b.get("block_id") != REVIEW_ACTIONS_BLOCK and b.get("type") != "actions"]
    if review.state == "corrected":
        kept.append(_section("*Correct answer*\n" + escape_mrkdwn(_shorten(review.reference_answer, 2500))))
    kept.append(_context(settled_text(review)))
    return kept


# --- the reviewer's correction modal -----------------------------------------------------------------


def correction_modal(form: CorrectionForm, exchange: Exchange | None) -> dict:
    question = exchange.question if exchange is not None else ""
    return {
        "type": "modal",
        "callback_id": VIEW_CORRECTION,
        "private_metadata": json.dumps({"a": form.answer_id, "c": form.channel, "m": form.message_ts}),
        "title": _plain("Correct answer"),
        "submit": _plain("Save"),
        "close": _plain("Cancel"),
        "blocks": [
            _context("*Question:* " + escape_mrkdwn(_shorten(question, 1500))) if question else _context("_(question unknown)_"),
            {
                "type": "input", "block_id": CORRECT_ANSWER_INPUT[0], "label": _plain("The correct answer"),
                "element": {"type": "plain_text_input", "action_id": CORRECT_ANSWER_INPUT[1], "multiline": True,
                            "max_length": MAX_ANSWER_INPUT},
            },
            {
                "type": "input", "block_id": PROVISION_INPUT[0], "label": _plain("The provision it rests on"),
                "element": {"type": "plain_text_input", "action_id": PROVISION_INPUT[1], "max_length": 500,
                            "placeholder": _plain("e.g. 6 RCNY § 5-304(a), or EU AI Act Art. 99(3)")},
            },
            {
                "type": "input", "block_id": POST_IN_THREAD_INPUT[0], "optional": True, "label": _plain("Reply"),
                "element": {
                    "type": "checkboxes", "action_id": POST_IN_THREAD_INPUT[1],
                    "options": [{"text": _plain("Post it in the original thread as my correction"),
                                 "value": POST_IN_THREAD}],
                },
            },
        ],
    }


def read_correction_form(view: dict) -> CorrectionForm | None:
    try:
        meta = json.loads(view.get("private_metadata") or "{}")
        return CorrectionForm(str(meta["a"]), str(meta["c"]), str(meta["m"]))
    except (ValueError, KeyError, TypeError):
        return None


def read_correction(view: dict) -> tuple[str, str, bool]:
    """(correct answer, provision, post in the thread) as submitted."""
    values = (view.get("state") or {}).get("values") or {}

    def text(block: tuple[str, str]) -> str:
        return (((values.get(block[0]) or {}).get(block[1]) or {}).get("value") or "").strip()

    chosen = ((values.get(POST_IN_THREAD_INPUT[0]) or {}).get(POST_IN_THREAD_INPUT[1]) or {}).get("selected_options")
    post = any(o.get("value") == POST_IN_THREAD for o in chosen or [])
    return text(CORRECT_ANSWER_INPUT), text(PROVISION_INPUT), post


def correction_message(review: Review) -> SlackMessage:
    """The reviewer's correction as posted in the original thread."""
    provision = f"\n_Rests on {escape_mrkdwn(review.reference_provision)}_" if review.reference_provision else ""
    body = f"*Correction from <@{review.reviewer}>, a reviewer:*\n{escape_mrkdwn(review.reference_answer)}{provision}"
    return SlackMessage(
        text=escape_mrkdwn(f"Correction from a reviewer: {_shorten(review.reference_answer, 2000)}"),
        blocks=[_section(_shorten(body, SECTION_CHARS))],
    )

