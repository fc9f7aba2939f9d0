"""A content store in PostgreSQL, for workers and clients on several hosts.

``NOETA_CONTENT_STORE=postgresql://user@host/db`` selects it (``pip install 'noeta[postgres]'``).
One table, ``noeta_content(hash text primary key, media_type text, size bigint, data bytea)``,
created on first use. Bodies are immutable and content-addressed, so writes are idempotent
(``ON CONFLICT DO NOTHING``) and safe from any number of workers at once.
"""

from __future__ import annotations

import threading
from typing import Any

from noeta.context.content_store import ContentNotFoundError, content_hash
from noeta.errors import ConfigurationError
from noeta.protocols.messages import ContentRef

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    hash text PRIMARY KEY,
    media_type text NOT NULL,
    size bigint NOT NULL,
    data bytea NOT NULL
)
"""


class PostgresContentStore:
    """Thread-safe: one connection per thread (activities may run in worker threads)."""

    def __init__(self, dsn: str, table: str = "noeta_content") -> None:
        try:
            import psycopg
        except ImportError as err:
            raise ConfigurationError("the PostgreSQL content store needs: pip install 'noeta[postgres]'") from err
        if not table.replace("_", "").isalnum():
            raise ConfigurationError(f"invalid table name {table!r}")
        self._psycopg = psycopg
        self.dsn, self.table = dsn, table
        self._local = threading.local()
        with self._connect() as conn:
            conn.execute(_SCHEMA.format(table=table))  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"PostgresContentStore(table={self.table!r})"  # the DSN may hold a password

    def _connect(self) -> Any:
        return self._psycopg.connect(self.dsn, autocommit=True)

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = self._connect()
        return conn

    def put(self, data: bytes, media_type: str = "text/plain") -> ContentRef:
        digest = content_hash(data)
        self._conn().execute(
            f"INSERT INTO {self.table} (hash, media_type, size, data) VALUES (%s, %s, %s, %s) "  # noqa: S608
            "ON CONFLICT (hash) DO NOTHING",
            (digest, media_type, len(data), data),
        )
        return ContentRef(hash=digest, size=len(data), media_type=media_type)

    def get(self, ref: ContentRef | str) -> bytes:
        digest = ref.hash if isinstance(ref, ContentRef) else ref
        row = self._conn().execute(f"SELECT data FROM {self.table} WHERE hash = %s", (digest,)).fetchone()  # noqa: S608
        if row is None:
            raise ContentNotFoundError(
                f"content {digest[:12]}… is not in {self!r}: client and worker must use the same "
                "content store (NOETA_CONTENT_STORE)"
            )
        return bytes(row[0])
