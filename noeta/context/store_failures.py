"""What a content store's failure means, as typed errors: a write or read the store could not do
(:class:`~noeta.errors.ContentStoreError`, with its cause), a body that is not there
(:class:`~noeta.errors.ContentMissingError`) or is not the one stored under its hash
(:class:`~noeta.errors.ContentIntegrityError`).

Every store reports its failures through these functions, so a worker tells a full disk from a
database outage from a damaged body the same way whichever store it runs on.
"""

from __future__ import annotations

import errno
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from noeta.context.ownership import current_owner
from noeta.errors import ContentIntegrityError, ContentMissingError, ContentStoreError
from noeta.errors._storage import StoreFailureCause

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_PERMISSION = {errno.EACCES, errno.EPERM, errno.EROFS}
_UNREACHABLE = {errno.ECONNREFUSED, errno.ECONNRESET, errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EIO}
_ADVICE = {
    "full": "free space (or give the store more), then retry",
    "unreachable": "bring the store back (is the database running and reachable?)",
    "permission": "give the worker's user write access to the store",
    "other": "see the cause",
}


def failure_cause(exc: BaseException) -> StoreFailureCause:
    """Why the store failed, from an ``OSError``'s errno or a database error's SQLSTATE (class 53
    is insufficient resources, 42501 a missing privilege, 08 and a connection that fails before
    any SQLSTATE is unreachable)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        if exc.errno in _FULL:
            return "full"
        if exc.errno in _PERMISSION:
            return "permission"
        if exc.errno in _UNREACHABLE:
            return "unreachable"
        return "other"
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str):
        if sqlstate.startswith("53"):
            return "full"
        if sqlstate == "42501":
            return "permission"
        if sqlstate.startswith(("08", "57P")):
            return "unreachable"
        return "other"
    if isinstance(exc, ConnectionError) or type(exc).__name__ in {"OperationalError", "InterfaceError"}:
        return "unreachable"  # psycopg: the connection failed or broke, no statement ran
    return "other"


def is_store_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the operating system's or the database driver's (a store could not do
    its I/O), not a bug or bad data."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] == "psycopg"


@contextmanager
def typed_failures(store: object, doing: str) -> Iterator[None]:
    """Inside the block, the operating system's or the database driver's errors become a
    ContentStoreError naming ``store`` and what it was ``doing``."""
    try:
        yield
    except Exception as err:
        if is_store_failure(err):
            raise store_failure(store, err, doing) from err
        raise


def store_failure(store: object, exc: BaseException, doing: str) -> ContentStoreError:
    """The ContentStoreError for ``exc``, raised while ``doing`` something with ``store`` (named
    by its repr, which never holds a password)."""
    cause = failure_cause(exc)
    detail = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    return ContentStoreError(
        f"content store {store!r} could not {doing}: it is {cause} ({detail}); {_ADVICE[cause]}"
        if cause != "other"
        else f"content store {store!r} could not {doing} ({detail})",
        store=repr(store),
        cause=cause,
    )


def missing_body(store: object, digest: str, hint: str) -> ContentMissingError:
    """The store has no body ``digest``; ``hint`` says which setting client and worker share."""
    return ContentMissingError(
        f"content {digest} is not in {store!r}{_for_task()}: it was deleted, or client and worker "
        f"must use the same content store ({hint})",
        digest=digest,
        task_id=current_owner(),
        store=repr(store),
    )


def checked_body(store: object, digest: str, body: bytes) -> bytes:
    """``body`` when its sha256 is ``digest``; ContentIntegrityError otherwise (never served)."""
    if hashlib.sha256(body).hexdigest() != digest:
        raise altered_body(store, digest)
    return body


def altered_body(store: object, digest: str) -> ContentIntegrityError:
    """The error for body ``digest`` of ``store`` that is not what was stored under that hash."""
    return ContentIntegrityError(
        f"content {digest} in {store!r}{_for_task()} does not match its hash (altered or damaged "
        "where it is stored); restore it from a backup or start the task again",
        digest=digest,
        task_id=current_owner(),
        store=repr(store),
    )


def _for_task() -> str:
    owner = current_owner()
    return f", read for task {owner!r}," if owner else ""
