"""A content store in PostgreSQL, for workers and clients on several hosts.

``NOETA_CONTENT_STORE=postgresql://user@host/db`` selects it (``pip install 'noeta[postgres]'``).
Two tables, created (or brought up to date) on first use:

- ``noeta_content(hash text primary key, media_type, size, data bytea, stored_at)``: the bodies.
  They are immutable and content-addressed, so writes are idempotent and safe from any number of
  workers at once; ``stored_at`` is the last time anyone stored the body.
- ``noeta_content_owner(task_id, hash, stored_at)``: which task stored (or references) which body,
  for retention (see ``noeta.context.ownership``).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from noeta.config.postgres import psycopg_driver, table_name
from noeta.context.content_store import BodyStore, Released, content_hash
from noeta.context.ownership import current_owner
from noeta.context.store_failures import store_failure
from noeta.protocols.messages import ContentRef

if TYPE_CHECKING:
    from noeta.security.sealed_bodies import BodyCipher

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    hash text PRIMARY KEY,
    media_type text NOT NULL,
    size bigint NOT NULL,
    data bytea NOT NULL
);
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS stored_at timestamptz NOT NULL DEFAULT now();
CREATE TABLE IF NOT EXISTS {table}_owner (
    task_id text NOT NULL,
    hash text NOT NULL,
    stored_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, hash)
);
CREATE INDEX IF NOT EXISTS {table}_owner_hash ON {table}_owner (hash);
"""


class PostgresContentStore(BodyStore):
    """Thread-safe: one connection per thread (activities may run in worker threads). With a
    ``cipher`` the ``data`` column holds ciphertext; ``hash`` stays the plaintext's."""

    shared_setting = "NOETA_CONTENT_STORE"

    def __init__(self, dsn: str, table: str = "noeta_content", cipher: BodyCipher | None = None) -> None:
        """``dsn`` is a PostgreSQL connection string, ``table`` the bodies' table (its owners' table
        is named after it); ConfigurationError without psycopg or for a table name that is not an
        identifier."""
        self._psycopg = psycopg_driver("the PostgreSQL content store")
        table = table_name(table)
        self.dsn, self.table, self.owners, self.cipher = dsn, table, f"{table}_owner", cipher
        self._local = threading.local()
        with self._connect() as conn, conn.transaction():
            # Workers starting together would otherwise race on CREATE TABLE IF NOT EXISTS.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            conn.execute(_SCHEMA.format(table=table))

    def __repr__(self) -> str:
        """Name the store by its table (never the DSN, which may hold a password)."""
        return f"PostgresContentStore(table={self.table!r})"  # the DSN may hold a password

    def _connect(self) -> Any:
        return self._psycopg.connect(self.dsn, autocommit=True)

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = self._connect()
        return conn

    def _execute(self, doing: str, query: str, params: tuple[Any, ...]) -> Any:
        """Run one statement, its failures as :meth:`_failures` says."""
        with self._failures(doing):
            return self._conn().execute(query, params)

    @contextmanager
    def _failures(self, doing: str) -> Iterator[None]:
        """A database that cannot be reached or refuses a statement is a ContentStoreError naming
        the cause (the thread's connection is dropped, so the next call connects afresh)."""
        try:
            yield
        except self._psycopg.Error as err:
            if isinstance(err, (self._psycopg.OperationalError, self._psycopg.InterfaceError)):
                self._drop_connection()
            raise store_failure(self, err, doing) from err

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken: nothing more to release
                pass

    def put(self, data: bytes, media_type: str = "text/plain") -> ContentRef:
        """Store ``data`` under its hash (storing it again refreshes its time, so retention keeps
        it) and record the current task as an owner."""
        digest = content_hash(data)
        # Storing an existing body again refreshes stored_at (and locks its row): a retention run
        # under way then keeps it. One statement, so body and owner are recorded together.
        upsert = (
            f"INSERT INTO {self.table} (hash, media_type, size, data) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (hash) DO UPDATE SET stored_at = now()"
        )
        owner = current_owner()
        stored = self.cipher.seal(data, digest) if self.cipher else data
        doing = f"store a body of {len(data)} bytes"
        if owner is None:
            self._execute(doing, upsert, (digest, media_type, len(data), stored))
        else:
            self._execute(
                doing,
                f"WITH body AS ({upsert} RETURNING hash) "
                f"INSERT INTO {self.owners} (task_id, hash) SELECT %s, hash FROM body "
                "ON CONFLICT (task_id, hash) DO UPDATE SET stored_at = now()",
                (digest, media_type, len(data), stored, owner),
            )
        return ContentRef(hash=digest, size=len(data), media_type=media_type)

    def _read(self, digest: str) -> bytes | None:
        row = self._execute(
            f"read content {digest}", f"SELECT data FROM {self.table} WHERE hash = %s", (digest,)
        ).fetchone()
        return None if row is None else bytes(row[0])

    # -- retention ------------------------------------------------------------------------------

    def claim(self, digests: Collection[str]) -> None:
        """Record the current task as an owner of the stored bodies among ``digests`` (refreshing
        their time); nothing outside a task."""
        owner = current_owner()
        if owner is None or not digests:
            return
        self._execute(
            f"claim {len(digests)} bodies for task {owner}",
            f"WITH body AS (UPDATE {self.table} SET stored_at = now() WHERE hash = ANY(%s) RETURNING hash) "
            f"INSERT INTO {self.owners} (task_id, hash) SELECT %s, hash FROM body "
            "ON CONFLICT (task_id, hash) DO UPDATE SET stored_at = now()",
            (list(digests), owner),
        )

    def tasks(self) -> dict[str, datetime]:
        """Every task that owns bodies, with the time it last stored one (UTC)."""
        rows = self._execute(
            "list the tasks that own bodies", f"SELECT task_id, max(stored_at) FROM {self.owners} GROUP BY task_id", ()
        ).fetchall()
        return {task_id: at.astimezone(timezone.utc) for task_id, at in rows}

    def release(self, task_ids: Collection[str], stored_before: datetime) -> Released:
        """Forget these tasks' ownership and delete their bodies no other task owns and nobody
        stored since ``stored_before``, in one transaction; returns what was deleted."""
        with self._failures(f"release the bodies of {len(task_ids)} task(s)"):
            deleted = self._release(self._conn(), task_ids, stored_before)
        return Released(bodies=len(deleted), bytes=sum(size for (size,) in deleted))

    def _release(self, conn: Any, task_ids: Collection[str], stored_before: datetime) -> list[tuple[int]]:
        with conn.transaction():
            rows = conn.execute(
                f"DELETE FROM {self.owners} WHERE task_id = ANY(%s) RETURNING hash", (list(task_ids),)
            ).fetchall()
            candidates = sorted({hash_ for (hash_,) in rows})
            deleted = conn.execute(
                f"DELETE FROM {self.table} c WHERE c.hash = ANY(%s) AND c.stored_at < %s "
                f"AND NOT EXISTS (SELECT 1 FROM {self.owners} o WHERE o.hash = c.hash) RETURNING c.size",
                (candidates, stored_before),
            ).fetchall()
        return list(deleted)
