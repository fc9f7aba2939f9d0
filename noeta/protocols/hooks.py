"""Guards: checks on what the agent proposes to do, before it happens.

A guard dispatches with ``isinstance`` over the members of :data:`ProposedAction`, which is why
its members are exported and not just the union (an MCP server's request for the task's model,
:class:`~noeta.protocols.sampling.ProposedSampling`, lives with the rest of sampling).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, Union, runtime_checkable

from pydantic import Field

from noeta.protocols.elicitation import ElicitationRequest
from noeta.protocols.login_wait import LoginRequest
from noeta.protocols.sampling import ProposedSampling
from noeta.protocols.statuses import GoalStatus, Verdict
from noeta.protocols.tool import RiskLevel


@dataclass(frozen=True, slots=True)
class ProposedToolCall:
    """The model wants to call a tool; ``risk_level`` is the tool's."""
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    risk_level: RiskLevel = "low"
    type: Literal["tool_call"] = field(default="tool_call", kw_only=True)


@dataclass(frozen=True, slots=True)
class ProposedSpawnSubtask:
    """The model wants to start a sub-agent with ``goal``."""
    call_id: str
    goal: str
    type: Literal["spawn_subtask"] = field(default="spawn_subtask", kw_only=True)


@dataclass(frozen=True, slots=True)
class ProposedFinish:
    """The policy wants to end the goal with ``answer``."""
    answer: str
    status: GoalStatus = "completed"
    call_id: str = ""
    """Identifies this finish for an approval (``finish:<goal>:<n>``)."""
    type: Literal["finish"] = field(default="finish", kw_only=True)


ProposedAction = Annotated[
    Union[ProposedToolCall, ProposedSpawnSubtask, ProposedFinish, ProposedSampling, ElicitationRequest, LoginRequest],
    Field(discriminator="type"),
]
"""What can wait for a person: the four a guard judges (an MCP server's request for the task's
model among them), an MCP server's question during a tool call (never shown to guards: a
person answers it), and a tool call waiting for the operator's new login (more scope)."""


@dataclass(frozen=True, slots=True)
class GuardContext:
    """What a guard knows about the task an action belongs to."""
    task_id: str
    trace_id: str
    turn: int
    metadata: dict[str, Any] = field(default_factory=dict)
    """``Options.metadata`` of the task."""
    resources: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The task's resources, nearest first (a guard may consult a database, a policy service...)."""
    scope: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The task's merged scope, read-only (validate it with ``expect_scope(Model)``)."""


@dataclass(frozen=True, slots=True)
class VerdictResult:
    """``allow`` lets the action run, ``deny`` turns it into a failed result with ``reason``,
    ``ask`` holds it for human approval."""

    verdict: Verdict
    reason: str | None = None


@runtime_checkable
class Guard(Protocol):
    """Runs on the worker inside the recorded ``check_guards`` activity (so replay never re-runs
    it); ``check`` may be sync or async and may do I/O. Mounted with ``Options.guards`` and found on
    workers by ``name``."""

    @property
    def name(self) -> str:
        """The registry name workers find the guard by."""

    def check(self, action: ProposedAction, ctx: GuardContext) -> VerdictResult | Awaitable[VerdictResult]:
        """The verdict on ``action``: allow, deny (with a reason) or ask a human."""


@dataclass(frozen=True, slots=True)
class GuardDecision:
    """One guard's verdict on one action, as recorded in history."""

    call_id: str
    guard: str
    verdict: Verdict
    reason: str | None = None


def combine(verdicts: list[GuardDecision]) -> GuardDecision | None:
    """The deciding verdict for one action: the first deny, else the first ask, else None (allow)."""
    for wanted in ("deny", "ask"):
        for v in verdicts:
            if v.verdict == wanted:
                return v
    return None
