"""Alembic migrations shipped inside the package: no alembic.ini is needed at run time."""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Any constant: PostgreSQL replicas starting together take this lock so only one migrates.
_PG_MIGRATION_LOCK = 0x4879_5041


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "storage/sql/migrations has no revisions"
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade_to_head(engine: Engine) -> None:
    """Bring the schema to the newest revision, in one transaction.

    On SQLite the transaction starts with BEGIN IMMEDIATE (see engine.py), so a second process
    opening the same file waits, then finds the schema current; on PostgreSQL an advisory lock does
    the same for replicas starting together.
    """
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
