"""Alembic environment: runs on the connection `storage.sql.migrate` passes in, or on a URL."""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from storage.sql.models import Base

config = context.config
target_metadata = Base.metadata


def run_offline() -> None:
    """`--sql` mode: write the DDL for a URL's dialect without connecting."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:  # storage.sql.migrate always sets it; a hand-run alembic without one is told so
        raise RuntimeError("no sqlalchemy.url: run migrations through hypa (HYPA_DATABASE_URL)")
    engine = create_engine(url)
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()


def _run(connection) -> None:
    # render_as_batch: SQLite cannot ALTER most things; batch mode recreates the table instead.
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
