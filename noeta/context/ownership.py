"""Which task a stored body belongs to, so retention can delete the bodies of old tasks.

The content store is content-addressed: tasks share bodies (the same system prompt, the same
document). Stores that support retention record an owner for every ``put``: inside an activity
the owner is the activity's task (its workflow id), so tools that use the store directly are
covered too; elsewhere code names it with :func:`owned_by`. A body is deleted only once every task
that owns it closed longer ago than the retention period. Bodies stored with no owner are never
deleted by retention.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar

from temporalio import activity

from noeta.config.context_values import set_within

_owner: ContextVar[str | None] = ContextVar("noeta_content_owner", default=None)


def current_owner() -> str | None:
    """The task that bodies stored now belong to, or None."""
    explicit = _owner.get()
    if explicit is not None:
        return explicit
    if activity.in_activity():
        return activity.info().workflow_id or None
    return None


def owned_by(task_id: str) -> AbstractContextManager[None]:
    """Bodies stored inside this block belong to ``task_id``."""
    return set_within(_owner, task_id)
