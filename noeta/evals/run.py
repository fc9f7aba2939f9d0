"""What a scorer reads: one run of a case (a task), built from the task's event log alone.

Live evals, recorded tasks and online scoring all build it the same way, from the projected events
and the content store their bodies are in, so a scorer sees the same run whichever way it came.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.client.messages import ViewItem, as_messages
from noeta.context.content_store import ContentStore
from noeta.protocols import event_log as ev
from noeta.protocols.messages import Usage


@dataclass(frozen=True)
class ToolCall:
    """A tool call the run made (or tried: ``refused`` when a guard or a human stopped it)."""

    name: str
    arguments: dict[str, Any]
    refused: bool = False


@dataclass(frozen=True)
class EvalRun:
    """One task as scorers see it: its answer, structured data, messages, events, usage, cost and time."""

    task_id: str
    answer: str
    status: str
    """``completed``, ``failed`` (a goal that failed), or the task's end: ``error``, ``cancelled``, ``running``."""
    data: Any
    """The validated structured output (JSON values), None without an output schema."""
    usage: Usage
    turns: int
    duration_seconds: float
    """From the task's first event to its end (its last event while it runs)."""
    events: list[ev.EventEnvelope] = field(repr=False)
    store: ContentStore | None = field(default=None, repr=False, compare=False)
    error: str | None = None
    """Why the task did not end with an answer (its failure), else None."""

    @property
    def cost_usd(self) -> float:
        """What the task's model calls cost in US dollars (0 when its model has no price)."""
        return self.usage.cost_usd

    @property
    def tokens(self) -> int:
        """Input plus output tokens of the whole task."""
        return self.usage.input + self.usage.output

    def messages(self) -> list[ViewItem]:
        """The conversation as ``Client.messages`` shows it (bodies read from the content store)."""
        return as_messages(self.events, self.store) if self.store is not None else []

    def tool_calls(self) -> list[ToolCall]:
        """The tool calls the model asked for, in order (refused ones marked)."""
        refused = {e.payload.call_id for e in self.events if isinstance(e.payload, ev.ToolCallRefused)}
        return [
            ToolCall(e.payload.tool_name, dict(e.payload.arguments), e.payload.call_id in refused)
            for e in self.events
            if isinstance(e.payload, ev.ToolCallProposed)
        ]

    def of_type(self, kind: type[Any]) -> list[Any]:
        """The payloads of the run's events of one type, in order."""
        return [e.payload for e in self.events if isinstance(e.payload, kind)]


def run_from_events(task_id: str, events: list[ev.EventEnvelope], store: ContentStore | None) -> EvalRun:
    """The run a task's event log records (its last goal's answer; every goal's usage)."""
    answer, status, data, usage, turns, error = "", "running", None, Usage(), 0, None
    for envelope in events:
        payload = envelope.payload
        if isinstance(payload, ev.TaskCompleted):
            answer, status, data, usage, turns = payload.answer, payload.status, payload.data, payload.usage, payload.turns
        elif isinstance(payload, ev.TaskFailed):
            status, error = "error", payload.reason
        elif isinstance(payload, ev.TaskCancelled):
            status, error = "cancelled", payload.reason
    if not turns:
        turns = sum(1 for e in events if isinstance(e.payload, ev.ProviderCallCompleted))
    stamps = [e.timestamp for e in events if e.timestamp is not None]
    duration = (max(stamps) - min(stamps)).total_seconds() if stamps else 0.0
    return EvalRun(task_id, answer, status, data, usage, turns, duration, events, store, error)
