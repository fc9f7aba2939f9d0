"""Who acted on a task, as the Temporal caller identity of the request that did it.

Temporal records the identity of the client behind every start, signal, update and cancel in the
task's history (``WorkflowExecutionStarted.identity``, ``WorkflowExecutionSignaled.identity``,
the update's ``meta.identity``...). Noeta's own clients send an identity that says who acts:
``key:NAME`` for ``noeta serve``'s API key NAME (HTTP and the console), ``user:NAME`` for the OS
user (or ``--as``) of the CLI; anything else is a caller of Temporal's own (the Temporal UI, the
``temporal`` CLI, another SDK), recorded as it is. Approvals and the audit read it from history,
never from free text in a request's body.
"""

from __future__ import annotations

from typing import Literal

Via = Literal["key", "user", "temporal"]

KEY_PREFIX = "key:"
USER_PREFIX = "user:"


def key_identity(name: str) -> str:
    """The identity of requests made with ``noeta serve``'s API key ``name``."""
    return f"{KEY_PREFIX}{name}"


def user_identity(user: str) -> str:
    """The identity of an operator acting through Noeta's CLI (their OS user, or ``--as``)."""
    return f"{USER_PREFIX}{user}"


def parse_identity(identity: str) -> tuple[str, Via]:
    """``(who, via)``: the key's name (via ``key``), the user (via ``user``), or the Temporal
    caller identity as recorded (via ``temporal``)."""
    if identity.startswith(KEY_PREFIX) and len(identity) > len(KEY_PREFIX):
        return identity[len(KEY_PREFIX):], "key"
    if identity.startswith(USER_PREFIX) and len(identity) > len(USER_PREFIX):
        return identity[len(USER_PREFIX):], "user"
    return identity, "temporal"
