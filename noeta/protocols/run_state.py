"""A task's run state (:class:`Carry`) and the records a run keeps in its memo (refused tool
calls, budget warnings)."""

from __future__ import annotations

from dataclasses import dataclass, field

from noeta.protocols.activity_io import CompactedContext
from noeta.protocols.budget import CallCounts
from noeta.protocols.events_oversight import BudgetWarning, ToolCallRefused
from noeta.protocols.fallback import ProviderUsage
from noeta.protocols.interaction import GoalInput, InjectInput, TaskResult
from noeta.protocols.messages import ContentRef, Message, Usage
from noeta.protocols.resources import EquippedResource
from noeta.protocols.tool import ToolSpec


@dataclass(slots=True)
class Carry:
    """A task's run state: what the workflow keeps between steps and takes into its next run
    (continue-as-new). History-sized, not transcript-sized. Declared once, here: the workflow
    mutates one of these as it runs and hands a trimmed copy to its next run."""

    head: ContentRef | None = None
    """The stored transcript (see noeta.context.transcript)."""
    pending: list[Message] = field(default_factory=list)
    """Messages added since ``head`` was stored."""
    tools: list[ToolSpec] = field(default_factory=list)
    system_ref: ContentRef | None = None
    output_schema_ref: ContentRef | None = None
    trace_id: str = ""
    volatile_ref: ContentRef | None = field(default=None, kw_only=True)
    usage: Usage = field(default_factory=Usage)
    total_turns: int = 0
    turn: int = 0
    """Model calls in the current goal."""
    goal_index: int = 0
    goals_received: int = 1
    in_goal: bool = True
    """True: resume the decide loop of goal ``goal_index``; False: wait for the next goal."""
    validation_issues: list[str] = field(default_factory=list)
    finish_attempts: int = 0
    injections: list[InjectInput] = field(default_factory=list)
    closed: bool = False
    """A keep-open task's ``close`` arrived: end once queued goals are done."""
    goal_queue: list[tuple[int, GoalInput]] = field(default_factory=list)
    """Goals accepted but not started yet (their send_goal callers follow them here)."""
    goal_ids: dict[str, int] = field(default_factory=dict)
    recent_results: dict[int, TaskResult] = field(default_factory=dict)
    """Results of the goals (in a carry: the last ones, the current one included when idle)."""
    runs: int = 1
    """How many runs the task has had before this one."""
    mcp_tools_ref: ContentRef | None = None
    """The remote MCP servers' tools as listed when the task started (their schemas, for requests)."""
    owned_resources: list[EquippedResource] = field(default_factory=list)
    """Task-scoped resources this task owns (released by its final step)."""
    agents_ref: ContentRef | None = None
    """The declared sub-agents as tool definitions for the model (stored once by prepare)."""
    counts: CallCounts = field(default_factory=CallCounts)
    """Model and tool calls of the task (sub-agents included), as ``usage`` is for tokens."""
    goal_started: float | None = None
    """When the current goal started (workflow time, epoch seconds); set for tasks with limits."""
    budget_warned: list[str] = field(default_factory=list)
    """Limits whose BudgetWarning has been recorded (each is recorded once)."""
    model: str | None = None
    """The model the provider used when the task named none (its default), once a call reported it."""
    stream_offset: int = 0
    """Pieces published to the task's delta stream so far (its next offset; carried so offsets
    keep growing across continue-as-new)."""
    stream_listened_until: float = 0.0
    """Until when (workflow time, epoch seconds) a reader listens to the task's delta stream."""
    context_tokens: int = 0
    """The size of the last model call as its provider reported it (input plus output tokens): the
    base of the count of the next request (noeta.workflows.compaction)."""
    context: CompactedContext | None = None
    """What the model sees instead of the transcript's beginning, once it was compacted."""
    provider_index: int = 0
    """The provider the task calls: 0 its own, n the n-th of its ``fallback_providers`` (once a
    fallback happened; carried so a continued run stays on it)."""
    usage_by_provider: list[ProviderUsage] = field(default_factory=list)
    """The task's own model calls by provider and model; kept only by tasks with fallback providers."""
    shape: int = 0
    """The shape prepare_task recorded for the task (noeta.protocols.names, SHAPE_*)."""
    steering: list[tuple[int, GoalInput]] = field(default_factory=list)
    """Messages sent with ``if_busy="steer"`` while a goal ran, waiting for its next step (each with
    the index its caller follows; one the goal ends without taking becomes the next goal)."""
    steered_into: dict[int, int] = field(default_factory=dict)
    """The goal each taken steering message joined: its caller gets that goal's result."""
    learned_windows: dict[str, int] = field(default_factory=dict)
    """Context windows learned from refusals, by provider and model (noeta.protocols.window_refusals):
    smaller than the configured or catalogued one, they move the next compaction earlier."""


# A run's memo records of refused calls and budget warnings are the events they are projected as
# (so is its record of a provider fallback, noeta.protocols.fallback): the same fields, one class.
ToolRefusal = ToolCallRefused
"""A tool call the workflow refused without running it, recorded in the memo under REFUSED_MEMO_KEY."""
BudgetWarningRecord = BudgetWarning
"""A limit that reached its warning fraction, recorded once per limit under BUDGET_WARNING_MEMO_KEY."""
