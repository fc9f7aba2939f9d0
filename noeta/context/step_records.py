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
encrypted), appended to its task's log. Other backends map a key to a :class:`ContentRef` whose
body lives in the content store (and so gets whatever protection that store has). Backends follow
the content store: a directory beside a local store's bodies, a table beside a PostgreSQL store's.
Any other store gets an in-process record (de-duplication within one worker process only) unless
the worker's registry names a ``step_records`` of its own.

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
import zlib
from collections.abc import Collection, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from noeta.context.atomic_files import write_new
from noeta.context.content_store import ContentStore, LocalContentStore, open_body
from noeta.context.store_failures import typed_failures
from noeta.protocols.messages import ContentRef

if TYPE_CHECKING:
    from noeta.security.sealed_bodies import BodyCipher

logger = logging.getLogger(__name__)


@runtime_checkable
class StepRecords(Protocol):
    """Where a finished step's result is recorded by its step key, so that a retried attempt of the
    step finds it."""
    def get(self, key: str) -> ContentRef | None:
        """The reference recorded for ``key``, or None."""

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key``; the first record of a key wins."""
        ...


@runtime_checkable
class OutputRecords(Protocol):
    """Records that hold a step's output themselves (no content-store body to write and read)."""

    def get_output(self, key: str) -> bytes | None:
        """The output recorded for ``key``, or None."""

    def put_output(self, key: str, data: bytes) -> None:
        """Record ``data`` for ``key``; the first record of a key wins."""
        ...


@runtime_checkable
class ReleasingStepRecords(StepRecords, Protocol):
    """Step records that retention can clear, task by task."""
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


class StepOutputs:
    """Steps' recorded outputs by key, over any :class:`StepRecords`: kept by the records
    themselves when they can (:class:`OutputRecords`), else a content-store body each. Which of
    the two is decided once, not on every step (a runtime protocol check costs microseconds)."""

    def __init__(self, records: StepRecords, store: ContentStore) -> None:
        """``records`` keep the keys; ``store`` holds the outputs when the records cannot."""
        self.records, self.store = records, store
        self._own = records if isinstance(records, OutputRecords) else None

    def get(self, key: str) -> bytes | None:
        """The output recorded for step ``key``, or None; ContentStoreError when the records cannot
        be read."""
        with typed_failures(self.records, f"read the record of step {key}"):
            if self._own is not None:
                return self._own.get_output(key)
            ref = self.records.get(key)
        return None if ref is None else self.store.get(ref)

    def put(self, key: str, data: bytes) -> None:
        """Record ``data`` as step ``key``'s output (the first record of a key wins);
        ContentStoreError when it cannot be written."""
        with typed_failures(self.records, f"record step {key}"):
            if self._own is not None:
                self._own.put_output(key, data)
            else:
                self.records.put(key, self.store.put(data, "application/json"))


#: A local task's log of step outputs is a sequence of entries, each
#: ``\n<magic> <sha256 of the key> <body length> <crc32 of the body>\n<body>``. The leading newline
#: lets a reader find the next entry after one cut short by a crash; length and checksum tell a
#: whole entry from a torn one.
_ENTRY_MAGIC = b"noeta-step/1 "
_ENTRY_START = b"\n" + _ENTRY_MAGIC


def _log_entry(key_digest: str, body: bytes) -> bytes:
    return b"%s%s %d %08x\n%s" % (_ENTRY_START, key_digest.encode(), len(body), zlib.crc32(body), body)


def _log_entries(log: bytes) -> Iterator[tuple[str, bytes]]:
    """The whole entries of a log, in the order written, as (key digest, body)."""
    at = log.find(_ENTRY_START)
    while at != -1:
        header_end = log.find(b"\n", at + 1)
        if header_end == -1:
            return
        fields = log[at + len(_ENTRY_START) : header_end].split(b" ")
        whole = False
        if len(fields) == 3 and fields[1].isdigit():
            length = int(fields[1])
            body_end = header_end + 1 + length
            body = log[header_end + 1 : body_end]
            whole = (
                len(body) == length
                and log[body_end : body_end + 1] in (b"", b"\n")
                and fields[2] == b"%08x" % zlib.crc32(body)
            )
        if whole:
            yield fields[0].decode(), body
            at = body_end if body_end < len(log) else -1
        else:  # torn: look for the next entry after this one's start
            at = log.find(_ENTRY_START, at + 1)


#: How a record of an earlier release begins: a ContentRef's JSON, one file per key.
_REF_RECORD = b"{"


class LocalStepRecords:
    """A log file per task, ``root/<task>.log`` (the task id's sha256), to which each finished
    step appends its output: appending costs a fraction of creating a file (a step's other records
    go to the same file). Several writers may append to it at once (each entry is one ``write``
    to a file opened for appending). Records of earlier releases, one file per key holding a
    ContentRef into ``store``, sit at ``root/<task>/<key>`` or, from before they were filed by
    task, at ``root/ab/cdef…``; they are still read, and released."""

    def __init__(self, root: str | os.PathLike[str], store: LocalContentStore | None = None) -> None:
        """The records live under ``root``; ``store`` is the local content store beside them, if
        any."""
        self.root = Path(root)
        self.store = store
        """The content store beside: its key seals outputs, and older records point into it."""

    def _task_dir(self, task_id: str) -> Path:
        return self.root / _sha256(task_id)[:40]

    def _task_log(self, task_id: str) -> Path:
        return self._task_dir(task_id).with_suffix(".log")

    def _log(self, key: str) -> Path:
        """The log a key's output goes to: its task's (a key not made by step_key: its own)."""
        return self._task_log(task_of(key) or key)

    def _path(self, key: str) -> Path:
        task_id = task_of(key)
        return self._unfiled_path(key) if task_id is None else self._task_dir(task_id) / _sha256(key)

    def _unfiled_path(self, key: str) -> Path:
        digest = _sha256(key)
        return self.root / digest[:2] / digest[2:]

    def get(self, key: str) -> ContentRef | None:
        """The ref of a record made by :meth:`put` (as earlier releases recorded every step)."""
        for path in (self._path(key), self._unfiled_path(key)):  # then where an older release put it
            try:
                return _ref(path.read_bytes())
            except FileNotFoundError:
                continue
        return None

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key`` in a file of its own, unless the key has a record already."""
        path = self._path(key)
        if path.exists() or self._unfiled_path(key).exists():
            return
        write_new(str(path), _ref_json(ref))

    def get_output(self, key: str) -> bytes | None:
        """The output recorded for ``key`` (from its task's log, or through an older ContentRef
        record), or None."""
        ref = self.get(key)  # an earlier release's record was written first: it wins
        if ref is not None:
            return None if self.store is None else self.store.get(ref)
        try:
            log = self._log(key).read_bytes()
        except FileNotFoundError:
            return None
        digest = _sha256(key)
        body = next((body for entry_key, body in _log_entries(log) if entry_key == digest), None)
        return None if body is None else self._open(digest, body)

    def put_output(self, key: str, data: bytes) -> None:
        """Append ``data`` for ``key`` to its task's log (sealed when the store is encrypted); the
        first record of a key wins on reading."""
        digest = _sha256(key)
        entry = _log_entry(digest, self._seal(digest, data))
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd = os.open(self._log(key), flags, 0o600)
        except FileNotFoundError:  # the first record, or the directory was removed since
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._log(key), flags, 0o600)
        try:
            written = os.write(fd, entry)
        finally:
            os.close(fd)
        if written != len(entry):  # a full disk: the torn entry is skipped by readers
            raise OSError(f"step record for {key!r} written in part ({written} of {len(entry)} bytes)")

    @property
    def _cipher(self) -> BodyCipher | None:
        return self.store.cipher if self.store is not None else None

    def _seal(self, key_digest: str, data: bytes) -> bytes:
        cipher = self._cipher
        return cipher.seal(data, key_digest) if cipher is not None else data

    def _open(self, key_digest: str, body: bytes) -> bytes:
        return open_body(self._cipher, body, key_digest)

    def release(self, task_ids: Collection[str], stored_before: datetime) -> int:
        """Delete the logs and record files of these tasks, and unfiled records written before
        ``stored_before``; returns how many records went."""
        deleted = 0
        for task_id in task_ids:
            log = self._task_log(task_id)
            try:
                deleted += sum(1 for _ in _log_entries(log.read_bytes()))
                log.unlink()
            except FileNotFoundError:
                pass
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
        """``dsn`` is a PostgreSQL connection string, ``table`` the records' table; ValueError for a
        table name that is not an identifier."""
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
        """The reference recorded for ``key``, or None."""
        row = self._conn().execute(f"SELECT ref FROM {self.table} WHERE key = %s", (key,)).fetchone()
        return None if row is None else _ref(row[0].encode())

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key``, filed under its task; an existing record is kept."""
        self._conn().execute(
            f"INSERT INTO {self.table} (key, ref, task_id) VALUES (%s, %s, %s) ON CONFLICT (key) DO NOTHING",
            (key, _ref_json(ref).decode(), task_of(key)),
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


class MemoryStepRecords:
    """Records within one process: a worker restarted elsewhere does not see them."""

    def __init__(self) -> None:
        """Starts empty."""
        self._refs: dict[str, ContentRef] = {}
        self._outputs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> ContentRef | None:
        """The reference recorded for ``key``, or None."""
        return self._refs.get(key)

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key`` unless it has one already."""
        with self._lock:
            self._refs.setdefault(key, ref)

    def get_output(self, key: str) -> bytes | None:
        """The output recorded for ``key``, or None."""
        return self._outputs.get(key)

    def put_output(self, key: str, data: bytes) -> None:
        """Record ``data`` for ``key`` unless it has one already."""
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
