"""feedback_acts: every rating act with its position on the platform's clock

Revision ID: 0003_feedback_acts
Revises: 0002_delivery_leases
Create Date: 2026-11-26

A rater's current rating becomes the fold of their acts in platform order (core/ratings.py), so
acts processed out of order end where the rater left off. Each existing current rating is carried
over as one act at position 0, before any act recorded from now on.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_feedback_acts"
down_revision = "0002_delivery_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    acts = op.create_table(
        "feedback_acts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("answer_id", sa.String(length=24), nullable=False),
        sa.Column("rater", sa.String(length=128), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("rating", sa.SmallInteger(), nullable=False),
        sa.Column("withdraws", sa.SmallInteger(), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("act_order", sa.BigInteger(), nullable=False),
        sa.Column("rated_at", sa.DateTime(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["answer_id"], ["answers.id"], name=op.f("fk_feedback_acts_answer_id_answers")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feedback_acts")),
        sa.UniqueConstraint(
            "answer_id", "rater", "act_order", name=op.f("uq_feedback_acts_answer_id_rater_act_order")
        ),
    )
    if op.get_context().as_sql:  # offline DDL (--sql): there are no rows to carry over
        return
    feedback = sa.table(
        "feedback",
        *(sa.column(name, sa.String()) for name in ("answer_id", "rater", "platform", "source", "reason")),
        sa.column("rating", sa.SmallInteger()),
        sa.column("rated_at", sa.DateTime()),
        sa.column("updated_at", sa.DateTime()),
    )
    rows = op.get_bind().execute(sa.select(feedback)).all()
    if rows:
        op.bulk_insert(acts, [
            {"answer_id": r.answer_id, "rater": r.rater, "platform": r.platform, "rating": r.rating,
             "withdraws": None, "source": r.source, "reason": r.reason, "act_order": 0, "rated_at": r.rated_at,
             "recorded_at": r.updated_at}
            for r in rows
        ])


def downgrade() -> None:
    op.drop_table("feedback_acts")
