"""messages: the lease on answering a message (holder, attempts, placeholder, delivered at)

Revision ID: 0002_delivery_leases
Revises: 0001_initial
Create Date: 2026-11-26

Answering becomes at-least-once: a claim is a lease that completes only when the reply is shown.
Messages answered before this revision count as delivered when their answer was stored; a message
with no answer is owed one (the recovery sweep answers it if it is recent enough).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_delivery_leases"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("claimed_by", sa.String(length=32), nullable=True))
    op.add_column("messages", sa.Column("attempts", sa.Integer(), server_default="1", nullable=False))
    op.add_column("messages", sa.Column("placeholder_id", sa.String(length=128), nullable=True))
    op.add_column("messages", sa.Column("delivered_at", sa.DateTime(), nullable=True))
    op.execute(
        "UPDATE messages SET delivered_at = "
        "(SELECT answers.created_at FROM answers WHERE answers.message_id = messages.id)"
    )
    op.create_index("ix_messages_owed", "messages", ["platform", "delivered_at", "claimed_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_messages_owed", table_name="messages")
    with op.batch_alter_table("messages") as batch:
        for column in ("delivered_at", "placeholder_id", "attempts", "claimed_by"):
            batch.drop_column(column)
