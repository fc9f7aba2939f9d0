"""Content-addressed storage for large bodies (sha256 -> bytes).

History carries :class:`ContentRef` values; the bytes live here. Client and worker must open the
same store: the local-directory store is the embedded default (one host), a PostgreSQL store serves
workers on several hosts.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from noeta.context.atomic_files import write_new
from noeta.context.ownership import current_owner
from noeta.context.store_failures import altered_body, checked_body, missing_body, store_failure
from noeta.errors import ContentIntegrityError, ContentMissingError
from noeta.protocols.messages import ContentRef

if TYPE_CHECKING:
    from noeta.security.sealed_bodies import BodyCipher


#: The store has no body with that hash (the name stores and callers used before the error moved
#: into noeta.errors; still a KeyError).
ContentNotFoundError = ContentMissingError


@runtime_checkable
class ContentStore(Protocol):
    """Content-addressed bodies (large tool outputs, images, transcripts, prompts) shared by clients
    and workers; the history holds only their ContentRefs."""
    def put(self, data: bytes, media_type: str = "text/plain") -> ContentRef:
        """Store ``data`` (idempotent: the same bytes get the same hash) and return its reference.
        """

    def get(self, ref: ContentRef | str) -> bytes:
        """The body with that reference or hash; ContentNotFoundError when the store has none."""


@dataclass(frozen=True)
class Released:
    """What :meth:`RetainingStore.release` deleted."""

    bodies: int
    bytes: int


@runtime_checkable
class RetainingStore(ContentStore, Protocol):
    """A content store that records which task stored each body, so old tasks' bodies can go.

    Every ``put`` also marks the body as freshly stored; retention never deletes a body stored
    after its cutoff, which closes the race with a running task storing the same bytes again.
    """

    def claim(self, digests: Collection[str]) -> None:
        """Record that the current task (see ``noeta.context.ownership``) references these bodies,
        stored earlier by someone else (e.g. images a client stored before starting the task)."""
        ...

    def tasks(self) -> dict[str, datetime]:
        """Every task that owns bodies, with the last time it stored one (UTC)."""
        ...

    def release(self, task_ids: Collection[str], stored_before: datetime) -> Released:
        """Forget that these tasks own bodies; delete each of their bodies that no other task owns
        and that nobody stored since ``stored_before``."""
        ...


def content_hash(data: bytes) -> str:
    """The sha256 hex digest a body is stored under."""
    return hashlib.sha256(data).hexdigest()


class BodyStore:
    """What the stores that keep bodies themselves share: a body is read as stored, then opened
    if sealed (with ``cipher``) and checked against its hash. Each store reads in ``_read``."""

    cipher: BodyCipher | None
    #: The setting client and worker must share to reach one store (named when a body is missing).
    shared_setting: ClassVar[str]

    def get(self, ref: ContentRef | str) -> bytes:
        """The body with that reference or hash, opened if sealed and checked against its hash:
        ContentMissingError (a ContentNotFoundError) when the store has none,
        ContentIntegrityError when it is not the body stored under that hash, ContentStoreError
        when the store cannot be read."""
        digest = ref.hash if isinstance(ref, ContentRef) else ref
        blob = self._read(digest)
        if blob is None:
            raise missing_body(self, digest, self.shared_setting)
        return open_checked(self, self.cipher, blob, digest)

    def _read(self, digest: str) -> bytes | None:
        """The stored bytes of ``digest`` (None: the store has none); ContentStoreError when the
        store cannot be read."""
        raise NotImplementedError


class LocalContentStore(BodyStore):
    """One file per body under ``root/ab/cdef...``; writes are atomic (temp file + rename).

    Owners are recorded in ``root/.owners/<task key>.refs``, one ``<hash> <task id as JSON>`` line
    per stored body (appends of one short line are atomic). A body's mtime is its last ``put``.
    A lock file serialises retention's deletions with puts of bodies that already exist.

    With a ``cipher`` the files hold ciphertext (:mod:`noeta.security.sealed_bodies`); the name is
    still the plaintext's hash.
    """

    shared_setting = "NOETA_HOME / NOETA_CONTENT_DIR"

    def __init__(self, root: str | os.PathLike[str], cipher: BodyCipher | None = None) -> None:
        """Bodies live under ``root`` (created if missing); with a ``cipher`` they are sealed at
        rest."""
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.cipher = cipher
        self._owners = self.root / ".owners"
        self._lock_path = self.root / ".retention.lock"
        self._root = str(self.root)  # puts build plain string paths: pathlib costs more than the I/O
        self._owners_made = False

    def __repr__(self) -> str:
        """Name the store by its directory."""
        return f"LocalContentStore({str(self.root)!r})"

    def _path(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"not a sha256 hex digest: {digest!r}")
        return self.root / digest[:2] / digest[2:]

    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        # Puts share the lock, retention takes it alone.
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock

    def put(self, data: bytes, media_type: str = "text/plain") -> ContentRef:
        """Store ``data`` under its hash (a body stored again is touched, so retention keeps it) and
        record the current task as an owner."""
        digest = content_hash(data)  # ours, so a valid name: no _path() check
        path = f"{self._root}/{digest[:2]}/{digest[2:]}"
        try:
            with self._locked(exclusive=False):
                try:
                    os.utime(path)  # stored again: retention keeps it for a full period from now
                except FileNotFoundError:
                    write_new(path, self.cipher.seal(data, digest) if self.cipher else data)
            self._record_owner([digest])
        except OSError as err:  # a full disk, a read-only or foreign directory
            raise store_failure(self, err, f"store a body of {len(data)} bytes") from err
        return ContentRef(hash=digest, size=len(data), media_type=media_type)

    def _read(self, digest: str) -> bytes | None:
        try:
            return self._path(digest).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise store_failure(self, err, f"read content {digest}") from err

    # -- retention ------------------------------------------------------------------------------

    def _refs_file(self, task_id: str) -> Path:
        return self._owners / f"{content_hash(task_id.encode())[:40]}.refs"

    def _record_owner(self, digests: Collection[str]) -> None:
        owner = current_owner()
        if owner is None or not digests:
            return
        if not self._owners_made:
            self._owners.mkdir(exist_ok=True)
            self._owners_made = True
        tag = json.dumps(owner)
        lines = "".join(f"{d} {tag}\n" for d in digests).encode()
        fd = os.open(self._refs_file(owner), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, lines)
        finally:
            os.close(fd)

    def claim(self, digests: Collection[str]) -> None:
        """Record the current task as an owner of the bodies among ``digests`` that exist (touching
        them as a put would); nothing outside a task."""
        if current_owner() is None:
            return
        present = []
        with self._locked(exclusive=False):
            for digest in digests:
                try:
                    os.utime(self._path(digest))  # like a put: safe from a retention run under way
                    present.append(digest)
                except FileNotFoundError:
                    pass
        self._record_owner(present)

    def _read_refs(self, path: Path) -> tuple[str | None, set[str]]:
        task_id, digests = None, set()
        for line in path.read_text().splitlines():
            digest, _, tag = line.partition(" ")
            if len(digest) == 64 and tag:
                digests.add(digest)
                task_id = task_id or json.loads(tag)
        return task_id, digests

    def tasks(self) -> dict[str, datetime]:
        """Every task with an owner file, with the time it last stored a body (UTC)."""
        found: dict[str, datetime] = {}
        for path in self._owners.glob("*.refs") if self._owners.exists() else ():
            task_id, _ = self._read_refs(path)
            if task_id is not None:
                found[task_id] = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
        return found

    def release(self, task_ids: Collection[str], stored_before: datetime) -> Released:
        """Forget these tasks' ownership and delete their bodies no other task owns and nobody
        stored since ``stored_before``; returns what was deleted."""
        releasing = {self._refs_file(t).name for t in task_ids}
        candidates: set[str] = set()
        kept: set[str] = set()
        for path in self._owners.glob("*.refs") if self._owners.exists() else ():
            (candidates if path.name in releasing else kept).update(self._read_refs(path)[1])
        cutoff = stored_before.timestamp()
        bodies = size = 0
        with self._locked(exclusive=True):
            for digest in sorted(candidates - kept):
                path = self._path(digest)
                try:
                    stat = path.stat()
                    if stat.st_mtime >= cutoff:
                        continue
                    path.unlink()
                except FileNotFoundError:
                    continue
                bodies, size = bodies + 1, size + stat.st_size
            for name in releasing:
                (self._owners / name).unlink(missing_ok=True)
        return Released(bodies=bodies, bytes=size)


def open_checked(store: object, cipher: BodyCipher | None, blob: bytes, digest: str) -> bytes:
    """A body ``store`` read, opened if sealed and checked against its hash ``digest``:
    ContentIntegrityError (naming the store and the reading task) when it is not what was stored."""
    try:
        plain = open_body(cipher, blob, digest)
    except ContentIntegrityError as err:  # a sealed body that fails authentication
        raise altered_body(store, digest) from err
    return checked_body(store, digest, plain)


def open_body(cipher: BodyCipher | None, blob: bytes, digest: str) -> bytes:
    """A stored body as plaintext (sealed bodies need the cipher)."""
    from noeta.security.sealed_bodies import open_unsealed

    return cipher.open(blob, digest) if cipher else open_unsealed(blob, digest)
