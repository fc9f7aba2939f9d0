"""Event-log payloads of a task's life: its start (input, scope, context plan, resources), its goals
and transcript, and how each goal and the task end. Catalogue and public names (its ``__all__``):
:mod:`noeta.protocols.event_log`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.protocols.budget import UsageLimits
from noeta.protocols.messages import ContentRef, Message, Usage
from noeta.protocols.scope import ScopeLevel
from noeta.protocols.scoring import ScoreRecord
from noeta.protocols.statuses import GoalStatus

#: ``TaskFailed.error_type`` when Temporal ended the workflow itself (no Noeta error was raised):
#: its execution timeout passed, or someone terminated it.
WORKFLOW_TIMED_OUT = "TimeoutError"
WORKFLOW_TERMINATED = "Terminated"


@dataclass(frozen=True, slots=True)
class TaskCreated:
    """The task started: its goal, model, provider, tools and limits."""
    goal: str
    model: str | None
    provider: str
    tools: list[str]
    max_turns: int
    max_retries: int
    limits: UsageLimits | None = None
    """The task's usage limits (docs/budgets.md)."""
    schedule_id: str | None = None
    """The schedule that started the task (docs/schedules.md); None for a task started otherwise."""
    priority: int | None = None
    """The priority the task was started with, 1 (first) to 5; None: none, so Temporal's default 3
    (docs/fairness.md)."""
    fairness_key: str | None = None
    """The fairness key its work waits on the task queue under: its tenant (None: none)."""
    agent: str | None = None
    """The agent it was started as (``triage``, docs/versions.md; None: started without one)."""
    agent_version: int | None = None
    """That agent's version, kept for the task's whole life (2 for ``triage@2``)."""


@dataclass(frozen=True, slots=True)
class TaskForked:
    """The task is a fork: its transcript is the source task's up to model turn ``turn``, which it
    decides anew (the first event of a forked task's log)."""
    source_task_id: str
    turn: int


@dataclass(frozen=True, slots=True)
class ScopeEquipped:
    """The task's scope, as the chain of tasks that equipped it and as merged."""
    levels: list[ScopeLevel]
    """What each task on the chain equipped, the root first (this task last when it equips any)."""
    scope: dict[str, Any]
    """The merged scope this task reads (nearest level wins)."""


@dataclass(frozen=True, slots=True)
class ContextChannel:
    """One content channel in the composed context: its name, whether it is stable (cached) or
    volatile, and its length in characters."""
    name: str
    stable: bool
    chars: int


@dataclass(frozen=True, slots=True)
class ContextPlanComposed:
    """How the task's context was laid out for the provider's cache: system prompt, tools, stable
    and volatile channels."""
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
class ContextCompacted:
    """What the model sees was made smaller before a call (docs/long-running.md): the oldest turns
    folded into a summary, previews, or a compactor's view. The transcript itself is unchanged."""
    strategy: str
    """``summarize``, ``previews`` or ``function``."""
    reason: str
    """``threshold`` (the count passed the window's threshold) or ``context_length`` (the provider
    refused the request as too long)."""
    tokens_before: int
    tokens_after: int
    turns_folded: int
    messages_folded: int
    summary: str | None = None
    """The summary the model sees from now on (strategy ``summarize``)."""
    summary_ref: ContentRef | None = None
    usage: Usage = field(default_factory=Usage)
    """What the summarizing call cost (``cache_read``: what the provider's prefix cache served)."""
    attempt: int = 1
    window_tokens: int | None = None
    """The window the compaction planned for: the model's, or the smaller one a refusal taught
    (reason ``context_length``: ``tokens_before`` is then the refused request's size)."""


@dataclass(frozen=True, slots=True)
class ResourcesEquipped:
    """The task-scoped resources created for the task, and those it inherits from its parents."""
    owned: list[str]
    """Task-scoped resources created for this task (keys: the objects stay in the worker)."""
    exposed: list[str]
    """Those of them its sub-agents see."""
    inherited: dict[str, str] = field(default_factory=dict)
    """Resources parents expose to it: key -> the parent task that owns it."""


@dataclass(frozen=True, slots=True)
class GoalReceived:
    """The task received a goal (its first, or the next one of a keep-open task)."""
    goal: str


@dataclass(frozen=True, slots=True)
class GoalSteered:
    """A message sent with ``if_busy="steer"`` joined the running goal, before its next model call
    (the message itself follows as ``MessagesAppended``)."""
    goal: str


@dataclass(frozen=True, slots=True)
class GoalInterrupted:
    """The running goal stopped at once for a message sent with ``if_busy="interrupt"``: its
    running calls were cancelled (or their results left unused), and the next goal begins."""
    answer: str
    usage: Usage
    turns: int


@dataclass(frozen=True, slots=True)
class MessagesAppended:
    """Messages were added to the transcript (by the user, the host, the model or tools)."""
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class TaskCompleted:
    """A goal ended with an answer (completed, or failed with the reason as the answer)."""
    answer: str
    status: GoalStatus
    usage: Usage
    turns: int
    data: Any = None
    """The validated structured output, when the task has an output schema."""


@dataclass(frozen=True, slots=True)
class TaskFailed:
    """The task failed: why, and the error's type name."""
    reason: str
    error_type: str | None


@dataclass(frozen=True, slots=True)
class TaskCancelled:
    """The task was cancelled."""
    reason: str = "cancelled"


@dataclass(frozen=True, slots=True)
class TaskContinuedAsNew:
    """The task continued in a new run (its id, transcript and event seq carry on)."""
    new_run_id: str | None


@dataclass(frozen=True, slots=True)
class TaskStalled:
    """A worker could not run the task's next step (its workflow task failed), so the step waits
    for a worker that can: one without the payload key the task is encrypted with, for instance.
    Temporal keeps retrying the step; the task goes on, nothing lost, once such a worker runs it."""
    error_type: str | None
    """The error the worker reported (``EncryptionKeyError``...)."""
    message: str
    key_id: str | None = None
    """For an ``EncryptionKeyError``: the key the worker lacks."""


@dataclass(frozen=True, slots=True)
class ResourcesReleased:
    """The task-scoped resources destroyed when the task ended, and the errors of those whose
    destroy raised."""
    released: list[str]
    errors: list[str] = field(default_factory=list)



@dataclass(frozen=True, slots=True)
class TaskScored:
    """The task's online scorers scored it as it ended (``Options.scoring``): each scorer's score,
    and ``mean`` over them (None when the worker could not score it: then ``skipped`` says why)."""
    scores: list[ScoreRecord]
    mean: float | None = None
    skipped: str | None = None
