"""Engines for any SQLAlchemy URL, with SQLite made safe for several threads and processes.

SQLite: WAL journal (readers never block the writer), a busy timeout (writers wait instead of
failing), foreign keys on, and every write transaction opened with BEGIN IMMEDIATE so that a
read-then-write transaction never hits the "database is locked" upgrade deadlock. Read-only work
uses `read_only(connection)` and a plain deferred BEGIN.

Every engine hides bound parameters from error messages and SQL logs: they carry what users asked
and what the bot answered, and a database error is logged with its traceback.
"""
from __future__ import annotations

import sqlite3
import time
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

SQLITE_BUSY_TIMEOUT_MS = 30_000
_WAL_RETRY_PAUSE_S = 0.01
_READ_ONLY = "hypa_read_only"


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # pool_pre_ping: a replica survives a database restart without serving stale connections.
        return create_engine(url, pool_pre_ping=True, hide_parameters=True)
    in_memory = parsed.database in (None, "", ":memory:")
    if in_memory:
        # One shared connection, or every pooled connection would see its own empty database.
        engine = create_engine(
            url, poolclass=StaticPool, connect_args={"check_same_thread": False}, hide_parameters=True
        )
    else:
        engine = create_engine(url, pool_size=8, max_overflow=16, pool_timeout=60, hide_parameters=True)
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's implicit BEGIN is deferred).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        _enable_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")  # durable across app crashes; WAL's usual pairing
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _enable_wal(cursor: Any, timeout_s: float = SQLITE_BUSY_TIMEOUT_MS / 1000) -> None:
    """PRAGMA journal_mode = WAL, retried while the database is locked.

    SQLite does not call the busy handler for this pragma: while another connection turns a new
    database file into WAL (processes or threads opening it for the first time together), it fails
    at once with "database is locked". Once the file is in WAL mode (the mode is stored in the file),
    the pragma changes nothing and does not fail this way.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(_WAL_RETRY_PAUSE_S)


def _sqlite_on_begin(connection: Connection) -> None:
    mode = "DEFERRED" if connection.get_execution_options().get(_READ_ONLY) else "IMMEDIATE"
    connection.exec_driver_sql(f"BEGIN {mode}")


def read_only(connection: Connection) -> Connection:
    """Mark a connection (before its first statement) as read-only: no write lock on SQLite."""
    return connection.execution_options(**{_READ_ONLY: True})
