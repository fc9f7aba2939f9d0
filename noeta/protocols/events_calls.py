"""Event-log payloads of the calls a task makes: model calls, tool calls (and the resources they
use) and sub-agents, with their attempts. Catalogue: :mod:`noeta.protocols.event_log`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.protocols.messages import Usage
from noeta.protocols.statuses import CallOutcome


@dataclass(frozen=True, slots=True)
class ProviderCallStarted:
    provider: str
    model: str | None
    turn: int
    messages_appended: int


@dataclass(frozen=True, slots=True)
class ProviderCallRetried:
    provider: str
    attempt: int
    """The attempt that failed."""
    error: str
    error_type: str | None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class ProviderCallCompleted:
    provider: str
    stop_reason: str
    usage: Usage
    attempt: int


@dataclass(frozen=True, slots=True)
class ProviderCallFailed:
    provider: str
    error: str
    error_type: str | None
    attempt: int


@dataclass(frozen=True, slots=True)
class ToolCallProposed:
    call_id: str
    tool_name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call_id: str
    tool_name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallRetried:
    call_id: str
    tool_name: str
    attempt: int
    error: str
    error_type: str | None


@dataclass(frozen=True, slots=True)
class ResourceCallObserved:
    call_id: str
    """The tool call that made it."""
    tool_name: str
    resource: str
    """The ``name`` given to ``instrument``."""
    op: str
    duration_ms: float
    outcome: CallOutcome
    error_type: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolCallCompleted:
    call_id: str
    tool_name: str
    success: bool
    attempt: int
    summary: str | None = None
    resource_calls_dropped: int = 0
    """Calls of instrumented resources beyond those recorded (ResourceCallObserved)."""


@dataclass(frozen=True, slots=True)
class ToolCallFailed:
    call_id: str
    tool_name: str
    error: str
    error_type: str | None
    attempt: int


@dataclass(frozen=True, slots=True)
class SubtaskSpawned:
    call_id: str
    goal: str
    child_task_id: str
    agent: str | None = None
    """The declared sub-agent it runs, if any."""


@dataclass(frozen=True, slots=True)
class SubtaskCompleted:
    call_id: str
    child_task_id: str
    success: bool
    answer: str
    usage: Usage | None = None
    """Tokens the child used (rolled up into the parent's usage); None when it failed."""
    data: Any = None
    """The child's structured output, when its options have an output schema."""


__all__ = [
    "ProviderCallCompleted",
    "ProviderCallFailed",
    "ProviderCallRetried",
    "ProviderCallStarted",
    "ResourceCallObserved",
    "SubtaskCompleted",
    "SubtaskSpawned",
    "ToolCallCompleted",
    "ToolCallFailed",
    "ToolCallProposed",
    "ToolCallRetried",
    "ToolCallStarted",
]
