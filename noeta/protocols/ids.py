"""What a task id or a task queue name given by a caller may be.

Both end up in places that read them literally: a task id is the workflow id, part of every
``/tasks/{task_id}`` URL of ``noeta serve``, of the Temporal UI's links and of the tool calls'
idempotency keys (``{task_id}/{call_id}``); a task queue is a name workers are started with on a
command line. So both are a short run of ASCII letters, digits and ``- _ . : @ + =``, starting
with a letter or a digit: no spaces, no ``/`` or ``?`` or ``#`` (URLs), nothing invisible.
Noeta's own ids (``task-…``) and queues (``noeta``, ``noeta-query-…``) fit.
"""

from __future__ import annotations

import re

from noeta.errors import ConfigurationError

#: The longest task id or task queue name accepted (Temporal's own limit is 1,000 characters).
MAX_ID_CHARS = 200

_ALLOWED = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+=-]*")
_RULE = "letters, digits and - _ . : @ + = (ASCII), starting with a letter or a digit"


def check_task_id(task_id: object) -> str:
    """``task_id`` if it is a valid task id, else a ConfigurationError saying what is wrong."""
    return _check("task_id", task_id)


def check_task_queue(task_queue: object) -> str:
    """``task_queue`` if it is a valid task queue name, else a ConfigurationError saying what is wrong."""
    return _check("task_queue", task_queue)


def _check(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} must be a string, got {type(value).__name__}")
    if not value:
        raise ConfigurationError(f"{what} must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise ConfigurationError(f"{what} has {len(value)} characters; at most {MAX_ID_CHARS} are allowed")
    if _ALLOWED.fullmatch(value) is None:
        bad = next((c for c in value if not re.fullmatch(r"[A-Za-z0-9_.:@+=-]", c)), value[0])
        raise ConfigurationError(f"{what} {value!r} is not allowed: {bad!r} at position {value.index(bad)}; "
                                 f"use {_RULE}")
    return value


__all__ = ["MAX_ID_CHARS", "check_task_id", "check_task_queue"]
