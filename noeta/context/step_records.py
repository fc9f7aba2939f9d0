"""Finished steps by key: how a retried attempt finds that its step already ran.

Temporal runs an activity at least once: when a step finishes but its completion never reaches
the server (the server is down, the worker is killed in between), the server times the attempt
out and runs it again. So a worker records each finished model or tool call under its step key
(unique per logical call, stable across attempts; see ``InvokeToolInput.idempotency_key``)
*before* reporting it, and a retried attempt that finds a record returns the recorded result
instead of running the step again. What is left is the instant between a step's end and its
record: a worker killed exactly there runs the step again, which is why tools with side effects
still get the key to de-duplicate on their side.

A record maps a key to a :class:`ContentRef`; the result itself lives in the content store (and
so gets whatever protection that store has). Backends follow the content store: a directory
beside a local store's bodies, a table beside a PostgreSQL store's. Any other store gets an
in-process record (de-duplication within one worker process only) unless the worker's registry
names a ``step_records`` of its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from noeta.context.atomic_files import write_new
from noeta.context.content_store import ContentStore, LocalContentStore
from noeta.protocols.messages import ContentRef

logger = logging.getLogger(__name__)


@runtime_checkable
class StepRecords(Protocol):
    def get(self, key: str) -> ContentRef | None: ...

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key``; the first record of a key wins."""
        ...


def _ref_json(ref: ContentRef) -> bytes:
    return json.dumps({"hash": ref.hash, "size": ref.size, "media_type": ref.media_type}).encode()


def _ref(data: bytes) -> ContentRef:
    raw = json.loads(data)
    return ContentRef(hash=raw["hash"], size=int(raw["size"]), media_type=raw["media_type"])


class LocalStepRecords:
    """One small file per key under ``root`` (named by the key's sha256); atomic writes."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._root = str(self.root)

    def _path(self, key: str) -> str:
        digest = hashlib.sha256(key.encode()).hexdigest()
        return f"{self._root}/{digest[:2]}/{digest[2:]}"

    def get(self, key: str) -> ContentRef | None:
        try:
            with open(self._path(key), "rb") as f:
                return _ref(f.read())
        except FileNotFoundError:
            return None

    def put(self, key: str, ref: ContentRef) -> None:
        path = self._path(key)
        if not os.path.exists(path):  # the first record of a key wins
            write_new(path, _ref_json(ref))


class PostgresStepRecords:
    """A table ``{table}(key text primary key, ref jsonb)`` beside a PostgreSQL content store."""

    def __init__(self, dsn: str, table: str) -> None:
        import psycopg

        if not table.replace("_", "").isalnum():
            raise ValueError(f"invalid table name {table!r}")
        self._psycopg, self.dsn, self.table = psycopg, dsn, table
        self._local = threading.local()
        self._conn().execute(f"CREATE TABLE IF NOT EXISTS {table} (key text PRIMARY KEY, ref text NOT NULL)")

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = self._psycopg.connect(self.dsn, autocommit=True)
        return conn

    def get(self, key: str) -> ContentRef | None:
        row = self._conn().execute(f"SELECT ref FROM {self.table} WHERE key = %s", (key,)).fetchone()
        return None if row is None else _ref(row[0].encode())

    def put(self, key: str, ref: ContentRef) -> None:
        self._conn().execute(
            f"INSERT INTO {self.table} (key, ref) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
            (key, _ref_json(ref).decode()),
        )


class MemoryStepRecords:
    """Records within one process: a worker restarted elsewhere does not see them."""

    def __init__(self) -> None:
        self._refs: dict[str, ContentRef] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> ContentRef | None:
        return self._refs.get(key)

    def put(self, key: str, ref: ContentRef) -> None:
        with self._lock:
            self._refs.setdefault(key, ref)


#: Directory, beside a local store's two-hex-digit body directories, that holds the records.
LOCAL_DIR = "steps"


def step_records_for(store: ContentStore) -> StepRecords:
    """The records that live beside ``store`` (see the module docstring)."""
    if isinstance(store, LocalContentStore):
        return LocalStepRecords(store.root / LOCAL_DIR)
    dsn, table = getattr(store, "dsn", None), getattr(store, "table", None)
    if type(store).__name__ == "PostgresContentStore" and isinstance(dsn, str) and isinstance(table, str):
        return PostgresStepRecords(dsn, f"{table}_steps")
    logger.warning(
        "content store %r has no step records; finished steps are recorded in this worker process "
        "only (give the Registry step_records= to share them between workers)",
        store,
    )
    return MemoryStepRecords()
