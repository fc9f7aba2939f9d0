"""Guards: checks on what the agent proposes to do, before it happens.

A guard dispatches with ``isinstance`` over the members of :data:`ProposedAction`, which is why
all three are exported and not just the union.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union, runtime_checkable


@dataclass(frozen=True)
class ProposedToolCall:
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    risk_level: str = "low"


@dataclass(frozen=True)
class ProposedSpawnSubtask:
    call_id: str
    goal: str


@dataclass(frozen=True)
class ProposedFinish:
    answer: str
    status: str = "completed"


ProposedAction = Union[ProposedToolCall, ProposedSpawnSubtask, ProposedFinish]


@dataclass(frozen=True)
class GuardContext:
    task_id: str
    trace_id: str
    turn: int
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VerdictResult:
    """``allow`` lets the action run, ``deny`` turns it into a failed result with ``reason``,
    ``ask`` holds it for human approval."""

    verdict: Literal["allow", "deny", "ask"]
    reason: str | None = None


@runtime_checkable
class Guard(Protocol):
    name: str

    def check(self, action: ProposedAction, ctx: GuardContext) -> VerdictResult: ...
