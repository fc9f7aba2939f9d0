"""The content store failed: it could not take a body (full, unreachable, refused), or a body it
returned is missing or is not the one stored under its hash."""

from __future__ import annotations

from typing import Literal

from noeta.errors._base import NoetaError

#: Why a store could not be written or read: its disk or database is ``full``, it is
#: ``unreachable`` (PostgreSQL down, a network partition), it refused the worker (``permission``),
#: or ``other`` (anything else the operating system or database reported).
StoreFailureCause = Literal["full", "unreachable", "permission", "other"]


class ContentStoreError(NoetaError):
    """The content store could not be written or read: names the ``store`` (its directory or table,
    never a password) and the ``cause`` (full, unreachable, permission, other). The worker keeps
    a finished step's output and retries only the write, up to the step's ``max_retries``; after
    that the step (and its task) fails with this error. Free space, bring the database back or fix
    the permissions, then start the task again."""

    non_retryable = False
    _detail_defaults = {"store": "", "cause": "other"}

    def __init__(self, message: str, store: str = "", cause: StoreFailureCause = "other") -> None:
        """``message`` says what failed and what to do."""
        super().__init__(message)
        self.store, self.cause = store, cause


class _BodyError(NoetaError):
    """A stored body that cannot be served as it was stored: names its ``digest`` (the sha256 it
    is stored under), the ``task_id`` reading it (when known) and the ``store``. Not retried:
    reading the same store again gives the same answer."""

    _detail_defaults = {"digest": "", "task_id": None, "store": ""}

    def __init__(self, message: str, digest: str = "", task_id: str | None = None, store: str = "") -> None:
        """``message`` says what failed and what to do."""
        super().__init__(message)
        self.digest, self.task_id, self.store = digest, task_id, store

    def __str__(self) -> str:
        """The message (not a KeyError's quoted repr)."""
        return str(self.args[0]) if self.args else ""


class ContentIntegrityError(_BodyError):
    """A stored body does not match the sha256 it is stored under (altered or damaged on disk or in
    the database): it is never served. Restore the body from a backup, or start the task again."""


class ContentMissingError(_BodyError, KeyError):
    """The store has no body under that hash: it was deleted (retention, an operator), or client
    and worker do not share one store (NOETA_HOME / NOETA_CONTENT_DIR / NOETA_CONTENT_STORE)."""
