"""SQL storage for conversations: threads, messages, answers, platform links, deliveries, feedback.

SQLite by default (WAL, busy timeout), any SQLAlchemy URL otherwise (PostgreSQL for several
replicas). The schema is managed by the Alembic migrations in `migrations/`, applied on open.
"""
from core.conversation_store import (
    AnswerRecord,
    FeedbackChange,
    MessageClaim,
    Outcome,
    OwedMessage,
    RatedAnswer,
    ReviewedAnswer,
    StoredAnswer,
)
from storage.sql.store import ConversationStore, new_answer_id

__all__ = [
    "AnswerRecord",
    "ConversationStore",
    "FeedbackChange",
    "MessageClaim",
    "Outcome",
    "OwedMessage",
    "RatedAnswer",
    "ReviewedAnswer",
    "StoredAnswer",
    "new_answer_id",
]
