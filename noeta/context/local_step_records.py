"""Step records on local disk, beside a local content store: one append-only log per task.

See :mod:`noeta.context.step_records` for what step records are for.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Collection, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from noeta.context.atomic_files import write_new
from noeta.context.content_store import LocalContentStore, open_body
from noeta.context.step_keys import ref_from_json, ref_json, sha256_hex, task_of
from noeta.protocols.messages import ContentRef

if TYPE_CHECKING:
    from noeta.security.sealed_bodies import BodyCipher


#: A local task's log of step outputs is a sequence of entries, each
#: ``\n<magic> <sha256 of the key> <body length> <crc32 of the body>\n<body>``. The leading newline
#: lets a reader find the next entry after one cut short by a crash; length and checksum tell a
#: whole entry from a torn one.
_ENTRY_MAGIC = b"noeta-step/1 "
_ENTRY_START = b"\n" + _ENTRY_MAGIC
#: Bound on the logs whose contents a process remembers (a worker runs tasks without end);
#: forgetting one costs a read of it on its next lookup, nothing else.
_REMEMBERED_LOGS = 4096


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
        self._lock = threading.Lock()
        self._logs: dict[str, tuple[int, set[str]]] = {}
        """Per log this process last read or appended to: its size then and the key digests in it."""

    def _task_dir(self, task_id: str) -> Path:
        return self.root / sha256_hex(task_id)[:40]

    def _task_log(self, task_id: str) -> Path:
        return self._task_dir(task_id).with_suffix(".log")

    def _log(self, key: str) -> Path:
        """The log a key's output goes to: its task's (a key not made by step_key: its own)."""
        return self._task_log(task_of(key) or key)

    def _path(self, key: str) -> Path:
        task_id = task_of(key)
        return self._unfiled_path(key) if task_id is None else self._task_dir(task_id) / sha256_hex(key)

    def _unfiled_path(self, key: str) -> Path:
        digest = sha256_hex(key)
        return self.root / digest[:2] / digest[2:]

    def get(self, key: str) -> ContentRef | None:
        """The ref of a record made by :meth:`put` (as earlier releases recorded every step)."""
        for path in (self._path(key), self._unfiled_path(key)):  # then where an older release put it
            try:
                return ref_from_json(path.read_bytes())
            except FileNotFoundError:
                continue
        return None

    def put(self, key: str, ref: ContentRef) -> None:
        """Record ``ref`` for ``key`` in a file of its own, unless the key has a record already."""
        path = self._path(key)
        if path.exists() or self._unfiled_path(key).exists():
            return
        write_new(str(path), ref_json(ref))

    def get_output(self, key: str) -> bytes | None:
        """The output recorded for ``key`` (from its task's log, or through an older ContentRef
        record), or None."""
        ref = self.get(key)  # an earlier release's record was written first: it wins
        if ref is not None:
            return None if self.store is None else self.store.get(ref)
        path = self._log(key)
        try:
            log = path.read_bytes()
        except FileNotFoundError:
            return None
        digest = sha256_hex(key)
        entries = list(_log_entries(log))
        self._remember(str(path), len(log), {entry_key for entry_key, _ in entries})
        body = next((body for entry_key, body in entries if entry_key == digest), None)
        return None if body is None else self._open(digest, body)

    def known_absent(self, key: str) -> bool:
        """Whether ``key`` surely has no record, told by ``stat`` alone, without reading a log
        (cheap enough for an activity to ask before a trip to an I/O thread): its task's log does
        not exist, or has the size it had when this process last read or appended to it and held
        no entry for the key then; and no record file of an earlier release exists for it. A log
        another process appended to since has another size, so its new entries are never missed."""
        path = self._log(key)
        try:
            size: int | None = os.stat(path).st_size
        except FileNotFoundError:
            size = None
        if size is not None:
            with self._lock:
                seen = self._logs.get(str(path))
            if seen is None or seen[0] != size or sha256_hex(key) in seen[1]:
                return False
        return not (self._path(key).exists() or self._unfiled_path(key).exists())

    def _remember(self, path: str, size: int, digests: set[str]) -> None:
        with self._lock:
            if len(self._logs) >= _REMEMBERED_LOGS and path not in self._logs:
                self._logs.clear()
            self._logs[path] = (size, digests)

    def _appended(self, path: str, size_after: int, length: int, digest: str) -> None:
        """Remember this process's own append of ``length`` bytes, if nobody else wrote between
        what it last saw and its append (else forget the log: the next lookup reads it)."""
        with self._lock:
            seen = self._logs.get(path)
            before, digests = seen if seen is not None else (0, set())
            if size_after != before + length:
                self._logs.pop(path, None)
                return
            digests.add(digest)  # in place: a copy per append costs a long task's every step its length
        self._remember(path, size_after, digests)

    def put_output(self, key: str, data: bytes) -> None:
        """Append ``data`` for ``key`` to its task's log (sealed when the store is encrypted); the
        first record of a key wins on reading."""
        digest = sha256_hex(key)
        entry = _log_entry(digest, self._seal(digest, data))
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        path = self._log(key)
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:  # the first record, or the directory was removed since
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, flags, 0o600)
        try:
            written = os.write(fd, entry)
            if written == len(entry):
                self._appended(str(path), os.fstat(fd).st_size, written, digest)
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
            with self._lock:
                self._logs.pop(str(log), None)
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


__all__ = ["LocalStepRecords"]
