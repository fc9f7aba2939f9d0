"""Which task a stored body belongs to, so retention can delete the bodies of old tasks.

The content store is content-addressed: tasks share bodies (the same system prompt, the same
document). Stores that support retention record an owner for every ``put``: inside an activity
the owner is the activity's task (its workflow id), so tools that use the store directly are
covered too; elsewhere code names it with :func:`owned_by`. A body is deleted only once every task
that owns it closed longer ago than the retention period. Bodies stored with no owner are never
deleted by retention.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from temporalio import activity

_owner: ContextVar[str | None] = ContextVar("noeta_content_owner", default=None)


def current_owner() -> str | None:
    """The task that bodies stored now belong to, or None."""
    explicit = _owner.get()
    if explicit is not None:
        return explicit
    if activity.in_activity():
        return activity.info().workflow_id or None
    return None


@contextmanager
def owned_by(task_id: str) -> Iterator[None]:
    """Bodies stored inside this block belong to ``task_id``."""
    token = _owner.set(task_id)
    try:
        yield
    finally:
        _owner.reset(token)
