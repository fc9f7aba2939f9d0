"""What passes between a running task and its clients: goals and what each returns, injected
context, and the approvals a guard asks a human for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from noeta.protocols.budget import CallCounts
from noeta.protocols.fallback import ProviderUsage
from noeta.protocols.hooks import ProposedAction
from noeta.protocols.messages import ImageBlock, Usage
from noeta.protocols.statuses import GoalOutcome, IfBusy


@dataclass(frozen=True, slots=True)
class InjectInput:
    """Host context for the model (a reminder, recalled memory); never a user's words."""

    text: str
    origin: Literal["system", "memory"] = "system"


@dataclass(frozen=True, slots=True)
class GoalInput:
    """A goal for a task, with optional images."""
    goal: str
    images: list[ImageBlock] = field(default_factory=list)
    goal_id: str = ""
    """Chosen by the client, so it can ask for the goal's result again in a later run."""
    if_busy: IfBusy = "enqueue"
    """What the goal does when the task is working on another (noeta.protocols.statuses.IfBusy)."""
    tenant: str | None = None
    """The tenant the sender acts for, when it must match the task's (a thread message over HTTP,
    which may reach a task it did not check first): another tenant's task refuses it as unknown."""


@dataclass(frozen=True, slots=True)
class TaskResult:
    """The outcome of one goal (and, for the workflow, of the last goal)."""

    answer: str
    status: GoalOutcome
    usage: Usage
    turns: int
    goal_index: int = 0
    data: Any = None
    """The validated structured output (JSON values) when the task has an output schema."""
    counts: CallCounts = field(default_factory=CallCounts)
    """Model and tool calls of the whole task so far (sub-agents included)."""
    usage_by_provider: list[ProviderUsage] = field(default_factory=list)
    """For a task with ``fallback_providers``: its own model calls' usage and cost by provider and
    model, in the order they were first used (empty for other tasks: ``usage`` is all one provider's)."""


@dataclass(frozen=True, slots=True)
class ApprovalInput:
    """A human's answer to an approval request: approved or not, and why. Who answered is the
    caller identity of the update that carries it (:mod:`noeta.protocols.identity`), never a field
    the caller fills in."""
    call_id: str
    approved: bool
    reason: str | None = None
    approver: str | None = None
    """The name the model's feedback gives (``Not approved by ...``): Noeta's clients put the
    approver's name here, the engine ``timeout``. The record's approver comes from the update's
    caller identity, never from this text."""
    arguments: dict[str, Any] | None = None
    """An approval may replace a tool call's arguments: the guards check the edited call again and
    the tool runs with these (the proposed ones stay in the record)."""


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """An action a guard held for a human's approval, with the guard's reason."""
    call_id: str
    action: ProposedAction
    reason: str | None
    guard: str
    waiting_since: str | None = None
    """When the action started waiting (ISO 8601, UTC)."""
    deadline: str | None = None
    """When the wait ends in a refusal unless someone answers (ISO 8601, UTC)."""
