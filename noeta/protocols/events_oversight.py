"""Event-log payloads of what checks and limits a task: guards' verdicts, human approvals, refused
calls, rejected answers, attempts and budgets. Catalogue and public names (its ``__all__``):
:mod:`noeta.protocols.event_log`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from noeta.protocols.events_calls import ToolCallEvent
from noeta.protocols.identity import Via
from noeta.protocols.messages import Usage
from noeta.protocols.server_requests import ServerRequest
from noeta.protocols.statuses import Verdict


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """One guard's verdict (allow, deny or ask) on one proposed action."""
    call_id: str
    """The action's id: a tool call id, a subtask's call id, or ``finish:<goal>:<n>``."""
    guard: str
    verdict: Verdict
    reason: str | None


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """A guard asked a human to approve an action; the task waits for the answer."""
    call_id: str
    guard: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class ElicitationRequested(ServerRequest):
    """A remote MCP server asked a person during a tool call; the task waits for the answer, which
    comes as ApprovalGranted (accept, the content as ``arguments``) or ApprovalDenied (decline;
    reason ``cancel``: cancel; ``timeout``: nobody answered) for ``call_id``. Given while the
    worker still holds the server's request open, it goes back on that request; otherwise the call
    stopped and is made again with it (docs/mcp.md)."""
    message: str
    requested_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ApprovalGranted:
    """A human approved a waiting action (the envelope's timestamp says when)."""
    call_id: str
    approver: str | None
    """Who: the API key's name, the CLI's user, or the Temporal caller identity (``via`` says
    which), from the update's caller identity as Temporal recorded it."""
    reason: str | None
    via: Via | None = None
    """``key`` (noeta serve, the console), ``user`` (noeta approve), ``temporal`` (the Temporal UI
    or CLI, another SDK)."""
    waited_seconds: float | None = None
    """How long the action waited for the answer."""
    arguments: dict[str, Any] | None = None
    """The arguments the approver replaced the proposed ones with (None: approved as proposed)."""
    proposed_arguments: dict[str, Any] | None = None
    """The tool call's arguments as the model proposed them, when the approver edited them."""


@dataclass(frozen=True, slots=True)
class ApprovalDenied:
    """A waiting action was refused, by a human or because nobody answered in time."""
    call_id: str
    approver: str | None
    """``timeout`` when nobody answered in time; else as ApprovalGranted's."""
    reason: str | None
    via: Via | None = None
    """As ApprovalGranted's; None for a timeout."""
    waited_seconds: float | None = None
    """How long the action waited for the answer."""


@dataclass(frozen=True, slots=True)
class ToolCallRefused(ToolCallEvent):
    """A tool call the engine did not run (a guard denied it, a human refused it, or the workflow
    rejected it); the model gets ``reason`` as its result."""
    arguments: dict[str, Any]
    reason: str
    """What the model is told, e.g. ``Denied by guard 'refunds': over the limit``."""


@dataclass(frozen=True, slots=True)
class ValidationFailed:
    """A final answer failed its output schema or a validator and goes back to the model."""
    attempt: int
    """1 for the first answer checked in this goal."""
    failure_type: Literal["schema", "validator"]
    issue: str


@dataclass(frozen=True, slots=True)
class AttemptsExhausted:
    """Every allowed answer of the goal failed validation: the goal fails with
    AttemptsExhaustedError."""
    attempts: int
    issues: list[str]
    last_failure_type: str


@dataclass(frozen=True, slots=True)
class BudgetWarning:
    """A limit of the task is nearly used up (``UsageLimits.warn_at``); recorded once per limit."""
    limit: str
    """The UsageLimits field, e.g. ``max_cost_usd`` or ``max_tool_calls_per_tool[search]``."""
    allowed: float
    used: float


@dataclass(frozen=True, slots=True)
class BudgetExceeded:
    """The task reached a limit and stopped with BudgetExceededError."""
    limit: str
    allowed: float
    used: float
    """The task's total when it stopped (the call that would pass the limit was never made)."""
    usage: Usage
    """Tokens and cost of the task then, sub-agents included."""
    model_calls: int = 0
    tool_calls: int = 0

