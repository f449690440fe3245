"""A fresh PostgreSQL database per test or bench run, on the server of HYPA_TEST_POSTGRES_URL."""
from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

# A PostgreSQL server URL whose user may create databases, e.g.
# postgresql+psycopg://hypa@127.0.0.1:5432/postgres (needs `pip install "psycopg[binary]"`; .ci/run starts
# a throwaway cluster). When set, store tests run on a fresh PostgreSQL database as well as on SQLite.
POSTGRES_URL = os.environ.get("HYPA_TEST_POSTGRES_URL", "")


@contextlib.contextmanager
def fresh_postgres_database(server_url: str = "") -> Iterator[str]:
    """The URL of a new, empty database on the server of `server_url` (default HYPA_TEST_POSTGRES_URL),
    dropped afterwards."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    server_url = server_url or POSTGRES_URL
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    name = f"hypa_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
