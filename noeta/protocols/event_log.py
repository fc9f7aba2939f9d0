"""The event log: typed envelopes projected from a task's Temporal workflow history.

There is no second event store: :func:`noeta.client.projection.project` derives these from history.
Each envelope type has one payload dataclass; ``EVENT_TYPES`` maps the type name to it. One
module on purpose, longer than most: the catalogue of every envelope is read as a whole.

===========================  ===========================================================
type                         meaning
===========================  ===========================================================
TaskCreated                  the workflow started: goal, model, provider, tools, limits
ScopeEquipped                the task's scope: each level (root first) and the merged view
ContextPlanComposed          the task's context was composed: system prompt, tools
ResourcesEquipped            task-scoped resources were created for the task; parents' exposed ones
GoalReceived                 a further goal arrived through ``send_goal``
MessagesAppended             messages were added to the transcript (user, assistant, tool)
ProviderCallStarted          a model call was scheduled (turn, model)
ProviderCallRetried          an attempt of a model call failed and another follows (attempt, error)
ProviderCallCompleted        the model answered (stop reason, usage, attempt)
ProviderCallFailed           the model call failed for good (error, attempt)
ToolCallProposed             the model asked for a tool call (call id, tool, arguments)
GuardVerdict                 a guard's verdict on a proposed action (allow, deny, ask)
ApprovalRequested            a guard sent an action to a human; the task waits (durably)
ApprovalGranted              a human approved the action
ApprovalDenied               a human refused it, or nobody answered before the timeout
ToolCallRefused              a tool call was refused without running (guard denial, human refusal or
                             approval timeout, unknown tool); the model gets the reason as a failed result
ToolCallStarted              a tool call was scheduled: the tool is invoked (call id, tool, arguments)
ToolCallRetried              an attempt of a tool call failed and another follows (attempt, error)
ResourceCallObserved         a tool called an instrumented resource (op, duration, outcome, fields)
ToolCallCompleted            the tool returned (success, attempt)
ToolCallFailed               the tool activity failed for good (error, attempt)
SubtaskSpawned               a child agent was started for a subtask (or a declared sub-agent)
SubtaskCompleted             the child agent ended (answer or failure, usage, structured data)
ValidationFailed             the final answer failed its schema or a validator; the model is re-prompted
AttemptsExhausted            every attempt allowed by max_retries failed (issues, last failure type)
BudgetWarning                a usage limit reached its warning fraction (limit, allowed, used)
BudgetExceeded               a usage limit stopped the task before the call that would pass it
TaskCompleted                a goal ended with an answer (status completed or failed)
TaskFailed                   the workflow failed with an error
TaskCancelled                the task was cancelled
TaskContinuedAsNew           the task continued in a new run (same task id)
ResourcesReleased            the task ended and its task-scoped resources were destroyed
===========================  ===========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Literal

from noeta.protocols.budget import UsageLimits
from noeta.protocols.messages import Message, Usage
from noeta.protocols.scope import ScopeLevel
from noeta.protocols.statuses import CallOutcome, GoalStatus, Verdict

Actor = str  # "engine", "provider:<name>", "tool:<name>", "guard:<name>", "human"


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
class ResourcesEquipped:
    owned: list[str]
    """Task-scoped resources created for this task (keys: the objects stay in the worker)."""
    exposed: list[str]
    """Those of them its sub-agents see."""
    inherited: dict[str, str] = field(default_factory=dict)
    """Resources parents expose to it: key -> the parent task that owns it."""


@dataclass(frozen=True, slots=True)
class ResourcesReleased:
    released: list[str]
    errors: list[str] = field(default_factory=list)


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
class GoalReceived:
    goal: str


@dataclass(frozen=True, slots=True)
class MessagesAppended:
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class ProviderCallStarted:
    provider: str
    model: str | None
    turn: int
    messages_appended: int


@dataclass(frozen=True, slots=True)
class ProviderCallCompleted:
    provider: str
    stop_reason: str
    usage: Usage
    attempt: int


@dataclass(frozen=True, slots=True)
class ProviderCallRetried:
    provider: str
    attempt: int
    """The attempt that failed."""
    error: str
    error_type: str | None
    retry_after: float | None = None


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
class GuardVerdict:
    call_id: str
    """The action's id: a tool call id, a subtask's call id, or ``finish:<goal>:<n>``."""
    guard: str
    verdict: Verdict
    reason: str | None


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    call_id: str
    guard: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class ApprovalGranted:
    call_id: str
    approver: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class ApprovalDenied:
    call_id: str
    approver: str | None
    """``timeout`` when nobody answered in time."""
    reason: str | None


@dataclass(frozen=True, slots=True)
class ToolCallRefused:
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    reason: str
    """What the model is told, e.g. ``Denied by guard 'refunds': over the limit``."""


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call_id: str
    tool_name: str
    arguments: dict[str, Any]


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
class ToolCallRetried:
    call_id: str
    tool_name: str
    attempt: int
    error: str
    error_type: str | None


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


@dataclass(frozen=True, slots=True)
class ValidationFailed:
    attempt: int
    """1 for the first answer checked in this goal."""
    failure_type: Literal["schema", "validator"]
    issue: str


@dataclass(frozen=True, slots=True)
class AttemptsExhausted:
    attempts: int
    issues: list[str]
    last_failure_type: str


@dataclass(frozen=True, slots=True)
class BudgetWarning:
    limit: str
    """The UsageLimits field, e.g. ``max_cost_usd`` or ``max_tool_calls_per_tool[search]``."""
    allowed: float
    used: float


@dataclass(frozen=True, slots=True)
class BudgetExceeded:
    limit: str
    allowed: float
    used: float
    """The task's total when it stopped (the call that would pass the limit was never made)."""
    usage: Usage
    """Tokens and cost of the task then, sub-agents included."""
    model_calls: int = 0
    tool_calls: int = 0


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


EventPayload = (
    TaskCreated
    | ContextPlanComposed
    | GoalReceived
    | MessagesAppended
    | ProviderCallStarted
    | ProviderCallRetried
    | ProviderCallCompleted
    | ProviderCallFailed
    | ToolCallProposed
    | GuardVerdict
    | ApprovalRequested
    | ApprovalGranted
    | ApprovalDenied
    | ToolCallRefused
    | ToolCallStarted
    | ToolCallRetried
    | ToolCallCompleted
    | ToolCallFailed
    | ValidationFailed
    | AttemptsExhausted
    | BudgetWarning
    | BudgetExceeded
    | SubtaskSpawned
    | SubtaskCompleted
    | TaskCompleted
    | TaskFailed
    | TaskCancelled
    | TaskContinuedAsNew
    | ScopeEquipped
    | ResourcesEquipped
    | ResourcesReleased
    | ResourceCallObserved
)

EVENT_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        TaskCreated,
        ContextPlanComposed,
        GoalReceived,
        MessagesAppended,
        ProviderCallStarted,
        ProviderCallRetried,
        ProviderCallCompleted,
        ProviderCallFailed,
        ToolCallProposed,
        GuardVerdict,
        ApprovalRequested,
        ApprovalGranted,
        ApprovalDenied,
        ToolCallRefused,
        ToolCallStarted,
        ToolCallRetried,
        ToolCallCompleted,
        ToolCallFailed,
        ValidationFailed,
        AttemptsExhausted,
        BudgetWarning,
        BudgetExceeded,
        SubtaskSpawned,
        SubtaskCompleted,
        TaskCompleted,
        TaskFailed,
        TaskCancelled,
        TaskContinuedAsNew,
        ScopeEquipped,
        ResourcesEquipped,
        ResourcesReleased,
        ResourceCallObserved,
    )
}


@dataclass(frozen=True, slots=True)
class EventEnvelope:
    """One record of a task's stream."""

    seq: int
    """Position in the task's stream: gap-free from 1, continuous across continue-as-new."""
    type: str
    """The payload's type name, e.g. ``TaskCreated``."""
    actor: Actor
    """Who acted: ``engine``, ``provider:<name>``, ``tool:<name>``, ``human``."""
    origin: Literal["human", "system", "memory"] | None
    """For message-carrying envelopes: where the message came from."""
    trace_id: str
    """Stable for a task and shared by its subtasks."""
    causation_id: int | None
    """``seq`` of the envelope that caused this one, if any."""
    payload: EventPayload
    task_id: str = ""
    timestamp: datetime | None = None
    history_event_id: int | None = None
    """The Temporal history event this envelope was projected from (for the UI)."""
    extra: dict[str, Any] = field(default_factory=dict)


Subscriber = Callable[[EventEnvelope], None]
Observer = Subscriber
