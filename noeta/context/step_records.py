"""Finished steps by key: how a retried attempt finds that its step already ran.

Temporal runs an activity at least once: when a step finishes but its completion never reaches
the server (the server is down, the worker is killed in between), the server times the attempt
out and runs it again. So a worker records each finished model or tool call under its step key
(unique per logical call, stable across attempts; see ``InvokeToolInput.idempotency_key``)
*before* reporting it, and a retried attempt that finds a record returns the recorded result
instead of running the step again. What is left is the instant between a step's end and its
record: a worker killed exactly there runs the step again, which is why tools with side effects
still get the key to de-duplicate on their side.

A local record holds the step's output itself (sealed with the store's key when the store is
encrypted), one file created per step. Other backends map a key to a :class:`ContentRef` whose body
lives in the content store (and so gets whatever protection that store has). Backends follow the
content store: a directory beside a local store's bodies, a table beside a PostgreSQL store's. Any other store gets an
in-process record (de-duplication within one worker process only) unless the worker's registry
names a ``step_records`` of its own.

Records are filed by task (a step key is ``{task_id}/{run_id}/{step}``, see
``noeta.workflows.steps.step_key``) so that retention removes a task's records together with its
bodies: once the bodies are gone a record would point at nothing. A record is only ever read by a
retry of its own step, which Temporal runs within that step's timeouts, so records older than the
retention period that cannot be told apart by task (written before records were filed by task)
are removed by age.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from noeta.context.atomic_files import write_new, write_once
from noeta.context.content_store import ContentStore, LocalContentStore, open_body
from noeta.protocols.messages import ContentRef

logger = logging.getLogger(__name__)


@runtime_checkable
class StepRecords(Protocol):
    def get(self, key: str) -> ContentRef | None: ...

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key``; the first record of a key wins."""
        ...


@runtime_checkable
class OutputRecords(Protocol):
    """Records that hold a step's output themselves (no content-store body to write and read)."""

    def get_output(self, key: str) -> bytes | None: ...

    def put_output(self, key: str, data: bytes) -> None:
        """Record ``data`` for ``key``; the first record of a key wins."""
        ...


@runtime_checkable
class ReleasingStepRecords(StepRecords, Protocol):
    def release(self, task_ids: Collection[str], stored_before: datetime) -> int:
        """Delete the records of these tasks (and unfiled ones written before ``stored_before``);
        returns how many went."""
        ...


def task_of(key: str) -> str | None:
    """The task a step key belongs to, or None for a key not made by ``step_key``."""
    head, _, step = key.rpartition("/")
    task_id, _, run_id = head.rpartition("/")
    return task_id if task_id and run_id and step else None


def _ref_json(ref: ContentRef) -> bytes:
    return json.dumps({"hash": ref.hash, "size": ref.size, "media_type": ref.media_type}).encode()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ref(data: bytes) -> ContentRef:
    raw = json.loads(data)
    return ContentRef(hash=raw["hash"], size=int(raw["size"]), media_type=raw["media_type"])


def recorded_output(records: StepRecords, store: ContentStore, key: str) -> bytes | None:
    """The output recorded for step ``key``, or None."""
    if isinstance(records, OutputRecords):
        return records.get_output(key)
    ref = records.get(key)
    return None if ref is None else store.get(ref)


def record_output(records: StepRecords, store: ContentStore, key: str, data: bytes) -> None:
    """Record ``data`` as step ``key``'s output (the first record of a key wins)."""
    if isinstance(records, OutputRecords):
        records.put_output(key, data)
    else:
        records.put(key, store.put(data, "application/json"))


#: How a local record that holds the output itself begins, followed by the body's length and a
#: newline (a record cut short by a crash is then told from a whole one). Records of earlier
#: releases hold a ContentRef's JSON instead.
_OUTPUT_MAGIC = b"noeta-step-output/1 "


#: How a record of an earlier release (a ContentRef's JSON, written atomically) begins.
_REF_RECORD = b"{"


def _output_record(body: bytes) -> bytes:
    return _OUTPUT_MAGIC + str(len(body)).encode() + b"\n" + body


def _output_body(record: bytes) -> bytes | None:
    """The body of a whole output record; None for one cut short."""
    head, newline, body = record[len(_OUTPUT_MAGIC):].partition(b"\n")
    if not newline or not head.isdigit() or int(head) != len(body):
        return None
    return body


class LocalStepRecords:
    """One small file per key under ``root/<task>/`` (the task id's and the key's sha256), holding
    the step's output. Records written before they were filed by task sit at ``root/ab/cdef…``;
    records of earlier releases hold a ContentRef into ``store``."""

    def __init__(self, root: str | os.PathLike[str], store: LocalContentStore | None = None) -> None:
        self.root = Path(root)
        self.store = store
        """The content store beside: its key seals outputs, and older records point into it."""

    def _task_dir(self, task_id: str) -> Path:
        return self.root / _sha256(task_id)[:40]

    def _path(self, key: str) -> Path:
        task_id = task_of(key)
        return self._unfiled_path(key) if task_id is None else self._task_dir(task_id) / _sha256(key)

    def _unfiled_path(self, key: str) -> Path:
        digest = _sha256(key)
        return self.root / digest[:2] / digest[2:]

    def get(self, key: str) -> ContentRef | None:
        """The ref of a record made by :meth:`put` (None for one that holds its output)."""
        for path in (self._path(key), self._unfiled_path(key)):  # then where an older release put it
            try:
                record = path.read_bytes()
            except FileNotFoundError:
                continue
            return None if record.startswith(_OUTPUT_MAGIC) else _ref(record)
        return None

    def put(self, key: str, ref: ContentRef) -> None:
        """A record pointing into the content store, as earlier releases wrote them."""
        path = self._path(key)
        if path.exists() or self._unfiled_path(key).exists():
            return
        write_new(str(path), _ref_json(ref))

    def get_output(self, key: str) -> bytes | None:
        for path in (self._path(key), self._unfiled_path(key)):  # then where an older release put it
            try:
                record = path.read_bytes()
            except FileNotFoundError:
                continue
            if record.startswith(_REF_RECORD):  # an earlier release's (written whole): a ContentRef
                return None if self.store is None else self.store.get(_ref(record))
            body = _output_body(record) if record.startswith(_OUTPUT_MAGIC) else None
            return None if body is None else self._open(key, body)  # None: cut short, run again
        return None

    def put_output(self, key: str, data: bytes) -> None:
        record = _output_record(self._seal(key, data))
        path = str(self._path(key))
        if write_once(path, record):
            return
        try:
            present = Path(path).read_bytes()
        except FileNotFoundError:  # released meanwhile
            present = b""
        whole = present.startswith(_REF_RECORD) or (
            present.startswith(_OUTPUT_MAGIC) and _output_body(present) is not None
        )
        if not whole:  # cut short by a crash: this attempt's output wins
            write_new(path, record)

    def _seal(self, key: str, data: bytes) -> bytes:
        cipher = self.store.cipher if self.store is not None else None
        return cipher.seal(data, _sha256(key)) if cipher is not None else data

    def _open(self, key: str, body: bytes) -> bytes:
        cipher = self.store.cipher if self.store is not None else None
        return open_body(cipher, body, _sha256(key))

    def release(self, task_ids: Collection[str], stored_before: datetime) -> int:
        deleted = 0
        for task_id in task_ids:
            folder = self._task_dir(task_id)
            for path in folder.glob("*") if folder.is_dir() else ():
                path.unlink(missing_ok=True)
                deleted += 1
            try:
                folder.rmdir()
            except OSError:
                pass  # gone already, or a record stored meanwhile
        return deleted + self._release_unfiled(stored_before.timestamp())

    def _release_unfiled(self, cutoff: float) -> int:
        deleted = 0
        for folder in self.root.glob("??") if self.root.is_dir() else ():
            for path in folder.iterdir():
                try:
                    if path.stat().st_mtime < cutoff:
                        path.unlink()
                        deleted += 1
                except FileNotFoundError:
                    continue
            try:
                folder.rmdir()
            except OSError:
                pass  # not empty
        return deleted


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
        import psycopg

        if not table.replace("_", "").isalnum():
            raise ValueError(f"invalid table name {table!r}")
        self._psycopg, self.dsn, self.table = psycopg, dsn, table
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
        row = self._conn().execute(f"SELECT ref FROM {self.table} WHERE key = %s", (key,)).fetchone()
        return None if row is None else _ref(row[0].encode())

    def put(self, key: str, ref: ContentRef) -> None:
        self._conn().execute(
            f"INSERT INTO {self.table} (key, ref, task_id) VALUES (%s, %s, %s) ON CONFLICT (key) DO NOTHING",
            (key, _ref_json(ref).decode(), task_of(key)),
        )

    def release(self, task_ids: Collection[str], stored_before: datetime) -> int:
        conn = self._conn()
        with conn.transaction():
            # Records written before they were filed by task: file the ones with a task in the key.
            conn.execute(
                f"UPDATE {self.table} SET task_id = substring(key from '^(.+)/[^/]+/[^/]+$') "
                "WHERE task_id IS NULL AND key ~ '^.+/[^/]+/[^/]+$'"
            )
            deleted = conn.execute(f"DELETE FROM {self.table} WHERE task_id = ANY(%s)", (list(task_ids),))
        return int(deleted.rowcount)


class MemoryStepRecords:
    """Records within one process: a worker restarted elsewhere does not see them."""

    def __init__(self) -> None:
        self._refs: dict[str, ContentRef] = {}
        self._outputs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> ContentRef | None:
        return self._refs.get(key)

    def put(self, key: str, ref: ContentRef) -> None:
        with self._lock:
            self._refs.setdefault(key, ref)

    def get_output(self, key: str) -> bytes | None:
        return self._outputs.get(key)

    def put_output(self, key: str, data: bytes) -> None:
        with self._lock:
            self._outputs.setdefault(key, data)


#: Directory, beside a local store's two-hex-digit body directories, that holds the records.
LOCAL_DIR = "steps"


def stored_step_records(store: ContentStore) -> ReleasingStepRecords | None:
    """The records that live beside ``store``, or None for a store with none beside it."""
    if isinstance(store, LocalContentStore):
        return LocalStepRecords(store.root / LOCAL_DIR, store)
    dsn, table = getattr(store, "dsn", None), getattr(store, "table", None)
    if type(store).__name__ == "PostgresContentStore" and isinstance(dsn, str) and isinstance(table, str):
        return PostgresStepRecords(dsn, f"{table}_steps")
    return None


def step_records_for(store: ContentStore) -> StepRecords:
    """The records that live beside ``store`` (see the module docstring)."""
    records = stored_step_records(store)
    if records is not None:
        return records
    logger.warning(
        "content store %r has no step records; finished steps are recorded in this worker process "
        "only (give the Registry step_records= to share them between workers)",
        store,
    )
    return MemoryStepRecords()
