"""Event-log payloads of a task's life: its start (input, scope, context plan, resources), its
goals and transcript, and how each goal and the task end. Catalogue: :mod:`noeta.protocols.event_log`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.protocols.budget import UsageLimits
from noeta.protocols.messages import Message, Usage
from noeta.protocols.scope import ScopeLevel
from noeta.protocols.statuses import GoalStatus

#: ``TaskFailed.error_type`` when Temporal ended the workflow itself (no Noeta error was raised):
#: its execution timeout passed, or someone terminated it.
WORKFLOW_TIMED_OUT = "TimeoutError"
WORKFLOW_TERMINATED = "Terminated"


@dataclass(frozen=True, slots=True)
class TaskCreated:
    goal: str
    model: str | None
    provider: str
    tools: list[str]
    max_turns: int
    max_retries: int
    limits: UsageLimits | None = None
    """The task's usage limits (docs/budgets.md)."""


@dataclass(frozen=True, slots=True)
class ScopeEquipped:
    levels: list[ScopeLevel]
    """What each task on the chain equipped, the root first (this task last when it equips any)."""
    scope: dict[str, Any]
    """The merged scope this task reads (nearest level wins)."""


@dataclass(frozen=True, slots=True)
class ContextChannel:
    name: str
    stable: bool
    chars: int


@dataclass(frozen=True, slots=True)
class ContextPlanComposed:
    system_prompt_chars: int
    """The system prompt alone."""
    tools: list[str]
    tool_fingerprints: dict[str, str]
    cached_prefix_chars: int = 0
    """Tools aside, what sits before the first cache boundary: system prompt + stable channels."""
    volatile_chars: int = 0
    """Volatile channels, sent after the transcript (outside the cache)."""
    channels: list[ContextChannel] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ResourcesEquipped:
    owned: list[str]
    """Task-scoped resources created for this task (keys: the objects stay in the worker)."""
    exposed: list[str]
    """Those of them its sub-agents see."""
    inherited: dict[str, str] = field(default_factory=dict)
    """Resources parents expose to it: key -> the parent task that owns it."""


@dataclass(frozen=True, slots=True)
class GoalReceived:
    goal: str


@dataclass(frozen=True, slots=True)
class MessagesAppended:
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class TaskCompleted:
    answer: str
    status: GoalStatus
    usage: Usage
    turns: int
    data: Any = None
    """The validated structured output, when the task has an output schema."""


@dataclass(frozen=True, slots=True)
class TaskFailed:
    reason: str
    error_type: str | None


@dataclass(frozen=True, slots=True)
class TaskCancelled:
    reason: str = "cancelled"


@dataclass(frozen=True, slots=True)
class TaskContinuedAsNew:
    new_run_id: str | None


@dataclass(frozen=True, slots=True)
class ResourcesReleased:
    released: list[str]
    errors: list[str] = field(default_factory=list)


__all__ = [
    "ContextChannel",
    "ContextPlanComposed",
    "GoalReceived",
    "MessagesAppended",
    "ResourcesEquipped",
    "ResourcesReleased",
    "ScopeEquipped",
    "TaskCancelled",
    "TaskCompleted",
    "TaskContinuedAsNew",
    "TaskCreated",
    "TaskFailed",
    "WORKFLOW_TERMINATED",
    "WORKFLOW_TIMED_OUT",
]
