"""A server's question answered on the session that asked, when a person answers quickly.

A remote MCP tool call whose server asks a person (``elicitation/create``) is not stopped at once:
the worker keeps the server's request open for a grace period (``elicitation_hold_seconds``),
tells the task about the question (the ``UPDATE_ELICITATION_HELD`` update, a :class:`HeldQuestion`;
the task lists it as it lists any question, noeta.protocols.elicitation) and asks it for the answer
now and then (the ``QUERY_ELICITATION_ANSWER`` query, a :class:`HeldAnswer`). An answer that comes
within the grace period goes back to the server on that request and the call completes in the
same activity; otherwise (or when the worker stops) the call stops as before, the task waits
durably and makes the call again with the answer. The task records each answer once, in the
``approve``/``refuse`` update, and the call either completes on the held request or is made again:
never both. Pure: the workflow and the worker use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.protocols.elicitation import ElicitationAnswer, ElicitationRequest, elicitation_id

#: The default grace period: long enough for a person at the screen, short of the 60 s most MCP
#: servers wait for a request's answer.
DEFAULT_HOLD_SECONDS = 45.0
#: At most this share of an attempt's time is spent holding, so the tool has time to finish after.
HOLD_SHARE_OF_ATTEMPT = 0.5


@dataclass(frozen=True, slots=True)
class HeldQuestion:
    """A question the worker holds its server's request open for (the update's argument)."""
    tool_call_id: str
    tool_name: str
    index: int
    """Which question of the call, from 1 (the ``n`` of ``elicit:<tool call id>:<n>``)."""
    request: dict[str, Any] = field(default_factory=dict)
    """What the server asked: ``server``, ``message``, ``requested_schema`` (as a stop carries it)."""

    @property
    def call_id(self) -> str:
        """The question's id, what an answer names."""
        return elicitation_id(self.tool_call_id, self.index)


@dataclass(frozen=True, slots=True)
class HeldAnswer:
    """The query's reply for a question: whether the task holds it (not held: the call must stop
    now), and the answer once a person gave it (None: still waiting)."""
    held: bool
    answer: ElicitationAnswer | None = None


def elicitation_request(tool_call_id: str, tool_name: str, index: int, asked: dict[str, Any], alias: str = "") -> ElicitationRequest:
    """The pending action a person answers, from what the server asked (a stop's or an update's)."""
    schema = asked.get("requested_schema")
    return ElicitationRequest(
        call_id=elicitation_id(tool_call_id, index),
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        server=str(asked.get("server") or alias),
        message=str(asked.get("message") or ""),
        requested_schema=dict(schema) if isinstance(schema, dict) else {},
    )


__all__ = [
    "DEFAULT_HOLD_SECONDS",
    "HOLD_SHARE_OF_ATTEMPT",
    "HeldAnswer",
    "HeldQuestion",
    "elicitation_request",
]
