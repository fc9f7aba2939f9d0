"""Step records in PostgreSQL, beside a PostgreSQL content store: a table of references.

See :mod:`noeta.context.step_records` for what step records are for.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from datetime import datetime
from typing import Any

from noeta.config.postgres import psycopg_driver, table_name
from noeta.context.step_keys import ref_from_json, ref_json, task_of
from noeta.protocols.messages import ContentRef

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (key text PRIMARY KEY, ref text NOT NULL);
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS task_id text;
CREATE INDEX IF NOT EXISTS {table}_task ON {table} (task_id);
CREATE INDEX IF NOT EXISTS {table}_unfiled ON {table} (key) WHERE task_id IS NULL;
"""


class PostgresStepRecords:
    """A table ``{table}(key text primary key, ref text, task_id text)`` beside a PostgreSQL
    content store."""

    def __init__(self, dsn: str, table: str) -> None:
        """``dsn`` is a PostgreSQL connection string, ``table`` the records' table; ConfigurationError without psycopg or
        for a table name that is not an identifier."""
        psycopg = psycopg_driver("step records in PostgreSQL")
        self._psycopg, self.dsn, self.table = psycopg, dsn, table_name(table)
        self._local = threading.local()
        with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
            # Workers starting together would otherwise race on the schema statements.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            conn.execute(_SCHEMA.format(table=table))

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = self._psycopg.connect(self.dsn, autocommit=True)
        return conn

    def get(self, key: str) -> ContentRef | None:
        """The reference recorded for ``key``, or None."""
        row = self._conn().execute(f"SELECT ref FROM {self.table} WHERE key = %s", (key,)).fetchone()
        return None if row is None else ref_from_json(row[0].encode())

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key``, filed under its task; an existing record is kept."""
        self._conn().execute(
            f"INSERT INTO {self.table} (key, ref, task_id) VALUES (%s, %s, %s) ON CONFLICT (key) DO NOTHING",
            (key, ref_json(ref).decode(), task_of(key)),
        )

    def release(self, task_ids: Collection[str], stored_before: datetime) -> int:
        """Delete the records of these tasks (filing by task those whose key names one first);
        returns how many went."""
        conn = self._conn()
        with conn.transaction():
            # Records written before they were filed by task: file the ones with a task in the key.
            conn.execute(
                f"UPDATE {self.table} SET task_id = substring(key from '^(.+)/[^/]+/[^/]+$') "
                "WHERE task_id IS NULL AND key ~ '^.+/[^/]+/[^/]+$'"
            )
            deleted = conn.execute(f"DELETE FROM {self.table} WHERE task_id = ANY(%s)", (list(task_ids),))
        return int(deleted.rowcount)


__all__ = ["PostgresStepRecords"]
