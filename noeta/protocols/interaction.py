"""What passes between a running task and its clients: goals and what each returns, injected
context, and the approvals a guard asks a human for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from noeta.protocols.budget import CallCounts
from noeta.protocols.hooks import ProposedAction
from noeta.protocols.messages import ImageBlock, Usage


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


@dataclass(frozen=True, slots=True)
class TaskResult:
    """The outcome of one goal (and, for the workflow, of the last goal)."""

    answer: str
    status: Literal["completed", "failed"]
    usage: Usage
    turns: int
    goal_index: int = 0
    data: Any = None
    """The validated structured output (JSON values) when the task has an output schema."""
    counts: CallCounts = field(default_factory=CallCounts)
    """Model and tool calls of the whole task so far (sub-agents included)."""


@dataclass(frozen=True, slots=True)
class ApprovalInput:
    """A human's answer to an approval request: approved or not, why, and who answered."""
    call_id: str
    approved: bool
    reason: str | None = None
    approver: str | None = None


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """An action a guard held for a human's approval, with the guard's reason."""
    call_id: str
    action: ProposedAction
    reason: str | None
    guard: str
