"""review loop: the reason kind of a 👎, reviews of exchanges, prompts awaiting a written reply

Revision ID: 0004_review_loop
Revises: 0003_feedback_acts
Create Date: 2026-11-26

- `feedback`, `feedback_acts`, `feedback_log` get `reason_kind`: the choice a 👎's reason was given
  with (wrong_provision, incomplete, outdated, not_covered, other); "" for ratings without a reason.
- `reviews`: one row per exchange a person was asked to review (a 👎 with its reason, an "Ask a
  person" press): its state (pending, corrected, fine), the reviewer, and the reviewer's reference
  answer and the provision it rests on.
- `reply_prompts`: Telegram ForceReply prompts (the reason for a 👎, a reviewer's correct answer), so
  a reply to one is read as that rather than as a question.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_review_loop"
down_revision = "0003_feedback_acts"
branch_labels = None
depends_on = None

_WITH_REASON = ("feedback", "feedback_acts", "feedback_log")


def upgrade() -> None:
    for table in _WITH_REASON:
        op.add_column(table, sa.Column("reason_kind", sa.String(length=32), server_default="", nullable=False))
    op.create_table(
        "reviews",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("answer_id", sa.String(length=24), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("requested_by", sa.String(length=128), nullable=False),
        sa.Column("request_kind", sa.String(length=16), nullable=False),
        sa.Column("requested_at", sa.DateTime(), nullable=False),
        sa.Column("requests", sa.Integer(), server_default="1", nullable=False),
        sa.Column("reviewer", sa.String(length=128), nullable=True),
        sa.Column("reviewed_at", sa.DateTime(), nullable=True),
        sa.Column("reference_answer", sa.Text(), nullable=True),
        sa.Column("reference_provision", sa.Text(), nullable=True),
        sa.Column("correction_posted", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(["answer_id"], ["answers.id"], name=op.f("fk_reviews_answer_id_answers")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reviews")),
        sa.UniqueConstraint("answer_id", name=op.f("uq_reviews_answer_id")),
    )
    op.create_index(op.f("ix_reviews_reviewed_at"), "reviews", ["reviewed_at"], unique=False)
    op.create_table(
        "reply_prompts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=128), nullable=False),
        sa.Column("prompt_id", sa.String(length=128), nullable=False),
        sa.Column("purpose", sa.String(length=16), nullable=False),
        sa.Column("answer_id", sa.String(length=24), nullable=False),
        sa.Column("user", sa.String(length=128), nullable=False),
        sa.Column("act_order", sa.BigInteger(), nullable=False),
        sa.Column("review_post_id", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["answer_id"], ["answers.id"], name=op.f("fk_reply_prompts_answer_id_answers")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reply_prompts")),
        sa.UniqueConstraint(
            "platform", "channel", "prompt_id", name=op.f("uq_reply_prompts_platform_channel_prompt_id")
        ),
    )


def downgrade() -> None:
    op.drop_table("reply_prompts")
    op.drop_index(op.f("ix_reviews_reviewed_at"), table_name="reviews")
    op.drop_table("reviews")
    for table in _WITH_REASON:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("reason_kind")
