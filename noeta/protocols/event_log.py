"""The event log: typed envelopes projected from a task's Temporal workflow history.

There is no second event store: :func:`noeta.client.projection.project` derives these from history.
Each envelope type has one payload dataclass; ``EVENT_TYPES`` maps the type name to it. The table
below is the whole catalogue; the payloads live by family in ``events_task`` (the task's life),
``events_calls`` (model, tool and sub-agent calls) and ``events_oversight`` (guards, approvals,
refusals, validation, attempts, budgets), and are all importable from here.

===========================  ===========================================================
type                         meaning
===========================  ===========================================================
TaskForked                   the task is a fork of another task's transcript up to a turn (first event)
TaskCreated                  the workflow started: goal, model, provider, tools, limits
ScopeEquipped                the task's scope: each level (root first) and the merged view
ContextPlanComposed          the task's context was composed: system prompt, tools
ContextCompacted             what the model sees was compacted before a call (strategy, tokens
                             before and after, turns folded); the transcript is unchanged
ResourcesEquipped            task-scoped resources were created for the task; parents' exposed ones
GoalReceived                 a further goal arrived through ``send_goal``
GoalSteered                  a message sent with ``if_busy="steer"`` joined the running goal
GoalInterrupted              the running goal stopped for a message sent with ``if_busy="interrupt"``
MessagesAppended             messages were added to the transcript (user, assistant, tool)
ProviderCallStarted          a model call was scheduled (turn, model)
ProviderCallRetried          an attempt of a model call failed and another follows (attempt, error)
ProviderCallCompleted        the model answered (stop reason, usage, attempt)
ProviderCallFailed           the model call failed for good (error, attempt)
ProviderFallback             the task moved to its next fallback provider (from, to, the error)
SamplingRequested            an MCP server asked the task's model during a tool call (its server, messages)
SamplingAnswered             the task's model answered it (the text the server gets when the call is made again)
ToolCallProposed             the model asked for a tool call (call id, tool, arguments)
GuardVerdict                 a guard's verdict on a proposed action (allow, deny, ask)
ApprovalRequested            a guard sent an action to a human; the task waits (durably)
ElicitationRequested         an MCP server asked a person during a tool call; the task waits (durably)
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
TaskScored                   the task's online scorers scored it as it ended (scores, mean)
TaskStalled                  a worker could not run the task's next step (e.g. it lacks the task's
                             payload key: error type, message, key id); the step waits for one that can
ResourcesReleased            the task ended and its task-scoped resources were destroyed
===========================  ===========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Literal, get_args

from noeta.protocols.events_calls import (
    ProviderCallCompleted,
    ProviderCallFailed,
    ProviderCallRetried,
    ProviderCallStarted,
    ProviderFallback,
    ResourceCallObserved,
    SamplingAnswered,
    SamplingRequested,
    SubtaskCompleted,
    SubtaskSpawned,
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallProposed,
    ToolCallRetried,
    ToolCallStarted,
)
from noeta.protocols.events_oversight import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    AttemptsExhausted,
    BudgetExceeded,
    BudgetWarning,
    ElicitationRequested,
    GuardVerdict,
    ToolCallRefused,
    ValidationFailed,
)
from noeta.protocols.events_task import (
    WORKFLOW_TERMINATED,
    WORKFLOW_TIMED_OUT,
    ContextChannel,
    ContextCompacted,
    ContextPlanComposed,
    GoalInterrupted,
    GoalReceived,
    GoalSteered,
    MessagesAppended,
    ResourcesEquipped,
    ResourcesReleased,
    ScopeEquipped,
    TaskCancelled,
    TaskCompleted,
    TaskContinuedAsNew,
    TaskCreated,
    TaskFailed,
    TaskForked,
    TaskScored,
    TaskStalled,
)

Actor = str  # "engine", "provider:<name>", "tool:<name>", "guard:<name>", "human"


EventPayload = (
    TaskCreated
    | ContextPlanComposed
    | GoalReceived
    | GoalSteered
    | GoalInterrupted
    | MessagesAppended
    | ProviderCallStarted
    | ProviderCallRetried
    | ProviderCallCompleted
    | ProviderCallFailed
    | ToolCallProposed
    | GuardVerdict
    | ApprovalRequested
    | ElicitationRequested
    | SamplingRequested
    | SamplingAnswered
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
    | TaskForked
    | TaskStalled
    | ContextCompacted
    | ProviderFallback
    | TaskScored
)

#: Each payload type by its name, in the union's order.
EVENT_TYPES: dict[str, type] = {cls.__name__: cls for cls in get_args(EventPayload)}


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


__all__ = [
    "Actor",
    "ApprovalDenied",
    "ApprovalGranted",
    "ApprovalRequested",
    "AttemptsExhausted",
    "BudgetExceeded",
    "BudgetWarning",
    "ContextChannel",
    "ContextCompacted",
    "ContextPlanComposed",
    "ElicitationRequested",
    "SamplingAnswered",
    "SamplingRequested",
    "EVENT_TYPES",
    "EventEnvelope",
    "EventPayload",
    "GoalInterrupted",
    "GoalReceived",
    "GoalSteered",
    "GuardVerdict",
    "MessagesAppended",
    "Observer",
    "ProviderCallCompleted",
    "ProviderCallFailed",
    "ProviderCallRetried",
    "ProviderCallStarted",
    "ProviderFallback",
    "ResourceCallObserved",
    "ResourcesEquipped",
    "ResourcesReleased",
    "ScopeEquipped",
    "Subscriber",
    "SubtaskCompleted",
    "SubtaskSpawned",
    "TaskCancelled",
    "TaskCompleted",
    "TaskContinuedAsNew",
    "TaskCreated",
    "TaskFailed",
    "TaskForked",
    "TaskScored",
    "TaskStalled",
    "ToolCallCompleted",
    "ToolCallFailed",
    "ToolCallProposed",
    "ToolCallRefused",
    "ToolCallRetried",
    "ToolCallStarted",
    "ValidationFailed",
    "WORKFLOW_TERMINATED",
    "WORKFLOW_TIMED_OUT",
]
