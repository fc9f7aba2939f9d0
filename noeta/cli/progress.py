"""One terminal line per model and tool step of a task, from its event log (``noeta run`` prints
them on stderr while the task runs).

Pure: :class:`Progress` turns envelopes into lines and remembers only what it needs to pair a step's
end with its start (call ids, start times).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from noeta.cli.render import call_text, short
from noeta.protocols.event_log import EventEnvelope
from noeta.protocols.messages import ContentRef, ToolResultBlock


def _seconds(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return ""
    return f"  ({(end - start).total_seconds():.1f} s)"


#: The one line of each event that needs nothing remembered, by type: f(payload, envelope).
_ONE_LINE: dict[str, Callable[[Any, EventEnvelope], str]] = {
    "ProviderCallRetried": lambda p, env: f"[model] attempt {p.attempt} failed, retrying: {short(p.error, 80)}",
    "ProviderFallback": lambda p, env: (
        f"[model] {p.from_provider} failed ({p.error_type}): moving to {p.to_provider}"
        + (f" ({p.to_model})" if p.to_model else "")
    ),
    "ToolCallRefused": lambda p, env: f"[tool]  {call_text(p.tool_name, p.arguments, 60)} ✗ refused: {short(p.reason, 80)}",
    "ToolCallRetried": lambda p, env: f"[tool]  {p.tool_name} attempt {p.attempt} failed, retrying: {short(p.error, 80)}",
    "ApprovalRequested": lambda p, env: (
        f"[guard] {p.guard} asks a human to approve {p.call_id}: `noeta approve {env.task_id} {p.call_id}`"
    ),
    "BudgetWarning": lambda p, env: f"[budget] {p.limit}: {p.used:g} of {p.allowed:g} used",
    "BudgetExceeded": lambda p, env: f"[budget] {p.limit} reached ({p.used:g} of {p.allowed:g}): the task stops",
    "TaskStalled": lambda p, env: (
        f"[worker] cannot run the next step, waiting for one that can: {p.error_type}: {short(p.message, 120)}"
    ),
}


class Progress:
    """``lines(envelope)`` -> the lines to print for it (often none)."""

    def __init__(self) -> None:
        """Starts with no call in progress."""
        self._model_started: datetime | None = None
        self._tool_started: dict[str, tuple[str, datetime | None]] = {}

    def lines(self, env: EventEnvelope) -> list[str]:
        """The lines to print for ``env``: model calls, tool calls, approvals, budget and the end of
        goals (often none)."""
        p: Any = env.payload
        if env.type == "ProviderCallStarted":
            self._model_started = env.timestamp
            return [f"[model] turn {p.turn} · {p.provider} …"]
        line = _ONE_LINE.get(env.type)
        if line is not None:
            return [line(p, env)]
        if env.type == "MessagesAppended" and env.actor.startswith("provider:"):
            took = _seconds(self._model_started, env.timestamp)
            out = []
            for message in p.messages:
                out += [f"[model] → calls {call_text(u.tool_name, u.arguments, 60)}{took}" for u in message.tool_uses]
                if message.text.strip():
                    out.append(f"[model] → answers{took}")
            return out
        if env.type == "ToolCallStarted":
            self._tool_started[p.call_id] = (p.tool_name, env.timestamp)
            return [f"[tool]  {call_text(p.tool_name, p.arguments, 60)} …"]
        if env.type == "MessagesAppended" and env.actor.startswith("tool:"):
            return [self._result(b, env.timestamp) for m in p.messages for b in m.content if isinstance(b, ToolResultBlock)]
        return []

    def _result(self, block: ToolResultBlock, at: datetime | None) -> str:
        name, started = self._tool_started.get(block.call_id, ("tool", None))
        body = block.output if block.success else (block.error or block.output)
        shown = f"<{body.size} bytes>" if isinstance(body, ContentRef) else short(body or "", 80)
        mark = "→" if block.success else "✗ failed:"
        return f"[tool]  {name} {mark} {shown}{_seconds(started, at)}"
