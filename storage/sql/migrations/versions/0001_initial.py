"""threads, messages, answers, platform messages, deliveries, feedback and its log

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-23

Written out in full (no import of storage.sql.models) so that later model changes never alter
what this revision creates. Times are naive UTC (`UtcDateTime` in the models).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "threads",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("workspace", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=128), nullable=False),
        sa.Column("thread_key", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_threads")),
        sa.UniqueConstraint(
            "platform", "workspace", "channel", "thread_key",
            name=op.f("uq_threads_platform_workspace_channel_thread_key"),
        ),
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("thread_id", sa.Integer(), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("workspace", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=128), nullable=False),
        sa.Column("message_id", sa.String(length=128), nullable=False),
        sa.Column("user", sa.String(length=128), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("sent_at", sa.DateTime(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], name=op.f("fk_messages_thread_id_threads")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
        sa.UniqueConstraint(
            "platform", "workspace", "channel", "message_id",
            name=op.f("uq_messages_platform_workspace_channel_message_id"),
        ),
    )
    op.create_index("ix_messages_thread_sent", "messages", ["thread_id", "sent_at"], unique=False)
    op.create_table(
        "answers",
        sa.Column("id", sa.String(length=24), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.Integer(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("standalone_question", sa.Text(), nullable=False),
        sa.Column("collection", sa.String(length=128), nullable=False),
        sa.Column("history_turns", sa.Integer(), nullable=False),
        sa.Column("complexity", sa.Integer(), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("chunk_ids", sa.JSON(), nullable=False),
        sa.Column("citations", sa.JSON(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("refused", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("tokens_in", sa.Integer(), nullable=False),
        sa.Column("tokens_out", sa.Integer(), nullable=False),
        sa.Column("context_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["message_id"], ["messages.id"], name=op.f("fk_answers_message_id_messages")),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], name=op.f("fk_answers_thread_id_threads")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_answers")),
        sa.UniqueConstraint("message_id", name=op.f("uq_answers_message_id")),
    )
    op.create_index(op.f("ix_answers_created_at"), "answers", ["created_at"], unique=False)
    op.create_index(op.f("ix_answers_thread_id"), "answers", ["thread_id"], unique=False)
    op.create_table(
        "platform_messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=128), nullable=False),
        sa.Column("message_id", sa.String(length=128), nullable=False),
        sa.Column("answer_id", sa.String(length=24), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["answer_id"], ["answers.id"], name=op.f("fk_platform_messages_answer_id_answers")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_platform_messages")),
        sa.UniqueConstraint(
            "platform", "channel", "message_id", name=op.f("uq_platform_messages_platform_channel_message_id")
        ),
    )
    op.create_index(op.f("ix_platform_messages_answer_id"), "platform_messages", ["answer_id"], unique=False)
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("delivery_id", sa.String(length=128), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
        sa.UniqueConstraint("platform", "delivery_id", name=op.f("uq_deliveries_platform_delivery_id")),
    )
    op.create_index(op.f("ix_deliveries_received_at"), "deliveries", ["received_at"], unique=False)
    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("answer_id", sa.String(length=24), nullable=False),
        sa.Column("rater", sa.String(length=128), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("rating", sa.SmallInteger(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("rated_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["answer_id"], ["answers.id"], name=op.f("fk_feedback_answer_id_answers")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feedback")),
        sa.UniqueConstraint("answer_id", "rater", name=op.f("uq_feedback_answer_id_rater")),
    )
    op.create_index(op.f("ix_feedback_updated_at"), "feedback", ["updated_at"], unique=False)
    op.create_table(
        "feedback_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("answer_id", sa.String(length=24), nullable=False),
        sa.Column("rater", sa.String(length=128), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("rating", sa.SmallInteger(), nullable=False),
        sa.Column("previous_rating", sa.SmallInteger(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("rated_at", sa.DateTime(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["answer_id"], ["answers.id"], name=op.f("fk_feedback_log_answer_id_answers")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feedback_log")),
    )
    op.create_index(op.f("ix_feedback_log_answer_id"), "feedback_log", ["answer_id"], unique=False)


def downgrade() -> None:
    for table in ("feedback_log", "feedback", "deliveries", "platform_messages", "answers", "messages", "threads"):
        op.drop_table(table)
