"""The data that crosses the workflow boundary: the task's input and result, and the inputs and
outputs of the worker's activities. History stores exactly these, so they stay small: transcripts
travel as a content-store reference (``head``) plus the messages added since the last call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from noeta.protocols.budget import CallCounts, UsageLimits
from noeta.protocols.hooks import GuardDecision, ProposedAction
from noeta.protocols.mcp import McpServerConfig, McpTarget
from noeta.protocols.messages import ContentRef, ImageBlock, LLMResponse, Message, ToolResultBlock, Usage
from noeta.protocols.resources import EquippedResource, ResourceCall, RunEnv
from noeta.protocols.scope import ScopeLevel
from noeta.protocols.tool import ToolResult, ToolSpec

#: Size bounds that keep every activity input far below Temporal's 2 MiB payload limit.
MAX_GOAL_BYTES = 256 * 1024
"""A goal (UTF-8); larger documents belong behind a tool or in a content channel."""
MAX_SYSTEM_PROMPT_BYTES = 256 * 1024
MAX_QUEUED_INJECTION_BYTES = 512 * 1024
"""Injected text waiting to enter the transcript; beyond it a signal's text is dropped, with a note."""
MAX_INJECTION_CHARS = 64 * 1024
"""One injected message."""
MAX_INJECTED_CHARS_PER_STEP = 256 * 1024
"""Injected text entering the transcript at one step; the rest waits for the next steps."""
MAX_CONTEXT_BYTES = 512 * 1024
"""All content-channel text of a task (UTF-8)."""

#: A worker silent this long while running a tool or a model call is presumed dead, and Temporal
#: retries the call on another worker (a tool's own ``heartbeat_seconds`` overrides it). The
#: activities heartbeat every third of it while they run.
DEFAULT_HEARTBEAT_SECONDS = 10.0

#: Configuration errors no model can fix (a missing resource, a scope that fails its schema):
#: raised by a tool or by a sub-agent, they end the task.
CONFIGURATION_ERRORS = ("ResourceNotFoundError", "ScopeError")
#: Tool errors that end the task instead of going back to the model as a failed tool result.
TASK_FATAL_TOOL_ERRORS = ("ToolIdentityMismatchError", "ToolNotRegisteredError", *CONFIGURATION_ERRORS)


@dataclass(frozen=True)
class PolicyRef:
    """A policy class by import path (``module:QualName``) and its constructor arguments."""

    path: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OutputSchema:
    """The structured output a task must produce."""

    json_schema: dict[str, Any]
    model: str | None = None
    """``module:QualName`` of a pydantic model; workers that have it validate with it."""


#: Attempts of one call whose worker was lost (killed, partitioned, or its completion never reached
#: the server) before they count as a failure of the call: such an attempt is not the step's fault.
MAX_LOST_ATTEMPTS = 10
#: Attempts Temporal may make of one call before it gives up by itself: a safety net only, the
#: worker's attempt ledger (noeta.activities._attempts) decides first. Rate-limit waits each take
#: an attempt, so the net leaves room for many.
SAFETY_NET_EXTRA_ATTEMPTS = 1000

AttemptKind = Literal["failure", "wait", "lost"]
"""``failure``: the call failed (counts against ``max_retries``); ``wait``: it was rate-limited or
found no free thread (counts against ``rate_limit_wait_seconds``); ``lost``: its worker was lost
(counts against MAX_LOST_ATTEMPTS)."""


@dataclass(frozen=True)
class AttemptFailure:
    """One failed attempt of a retried activity, carried to the next attempt in heartbeat details."""

    attempt: int
    error: str
    error_type: str | None = None
    retry_after: float | None = None
    kind: AttemptKind = "failure"
    delay: float | None = None
    """Seconds the worker asked Temporal to wait before the next attempt."""


@dataclass(frozen=True)
class AttemptBudget:
    """What one model or tool call may spend on retries; the worker's attempt ledger enforces it."""

    max_retries: int
    """Failed attempts allowed after the first (rate-limit waits and lost workers not counted)."""
    max_wait_seconds: float = 600.0
    """Total time the call may wait on rate limits (429 / retry-after, the worker's limiter)."""


def attempts_cap(max_retries: int) -> int:
    """Temporal's ``maximum_attempts`` for a call with a ledger (a safety net, see above)."""
    return max_retries + 1 + MAX_LOST_ATTEMPTS + SAFETY_NET_EXTRA_ATTEMPTS


@dataclass(frozen=True)
class ChannelContent:
    """A content channel's text for one task (from ``Options.content_channels`` / ``context``)."""

    name: str
    text: str
    stable: bool


@dataclass(frozen=True)
class ChannelUse:
    name: str
    stable: bool
    chars: int


@dataclass(frozen=True)
class ContextPlan:
    """What the composer put where (recorded in history as ContextPlanComposed)."""

    system_chars: int
    """System prompt plus stable channels: the cached prefix (with the tools)."""
    volatile_chars: int
    """Volatile channels, sent after the transcript, outside the cache."""
    channels: list[ChannelUse] = field(default_factory=list)


@dataclass(frozen=True)
class InjectInput:
    """Host context for the model (a reminder, recalled memory); never a user's words."""

    text: str
    origin: Literal["system", "memory"] = "system"


@dataclass
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


@dataclass(frozen=True)
class LoadTranscriptInput:
    head: ContentRef | None
    max_bytes: int = 1_000_000


@dataclass(frozen=True)
class LoadTranscriptOutput:
    messages: list[Message]
    omitted: int = 0
    """Oldest messages left out to keep the payload small (the provider still gets them all)."""


@dataclass(frozen=True)
class TaskInput:
    goal: str
    provider: str
    """Name of the provider in the worker's registry."""
    model: str | None = None
    system_prompt: str | None = None
    images: list[ImageBlock] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    tool_fingerprints: dict[str, str] = field(default_factory=dict)
    """Fingerprints the starter expects; the worker's tools must match them."""
    max_turns: int = 50
    max_retries: int = 3
    policy: PolicyRef | None = None
    keep_open: bool = False
    """Stay open after the first goal and take further goals through ``send_goal``."""
    trace_id: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    model_timeout_seconds: float = 300.0
    tool_timeout_seconds: float = 300.0
    workspace_dir: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    output_schema: OutputSchema | None = None
    validators: list[str] = field(default_factory=list)
    """Names of validators in the worker's registry, run in order on the final answer."""
    index: bool = False
    """Keep the SEARCH_ATTRIBUTES up to date (only when the cluster has them registered)."""
    guards: list[str] = field(default_factory=list)
    """Names of guards in the worker's registry, consulted before every tool call, subtask and finish."""
    approval_timeout_seconds: float = 86400.0
    """How long an action a guard sent for approval waits for a human before it is denied."""
    max_history_events: int | None = None
    """Continue as new once a run's history has this many events (None: when Temporal suggests)."""
    channels: list[ChannelContent] = field(default_factory=list)
    validate_tool_input: bool = False
    """Check every tool call's arguments against the tool's input_schema (off: the seed's default)."""
    thinking: dict[str, Any] | None = None
    effort: str | None = None
    provider_retries: int | None = None
    """Retries of a model call (None: ``max_retries``)."""
    tool_retries: int | None = None
    """Retries of a tool call (None: ``max_retries``; a tool's own ``max_retries`` wins)."""
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    """Remote MCP servers by alias; their tools are listed when the task starts."""
    resources: list[str] = field(default_factory=list)
    """Keys of the resources the task's Options name (``equip_resource`` specs or objects the
    worker must provide); live objects stay in the worker."""
    inherited_resources: dict[str, str] = field(default_factory=dict)
    """Resources exposed by parent tasks: key -> the nearest parent's task id."""
    scope: list[ScopeLevel] = field(default_factory=list)
    """Scope data equipped by this task and its parents, oldest first (see noeta.protocols.scope)."""
    scope_schema: "OutputSchema | None" = None
    """The scope the task requires, checked before its first model call."""
    subagents: list["SubAgentSpec"] = field(default_factory=list)
    """Sub-agents the model may call as tools; each runs as a child task."""
    limits: UsageLimits | None = None
    """Checked before every model call, tool round and subtask (noeta.workflows.budget); a sub-agent
    gets what is left of its parent's."""
    index_cost: bool = False
    """Also keep NoetaCostUSD up to date (the cluster has it registered)."""
    rate_limit_wait_seconds: float = 600.0
    """Most time one model or tool call may wait on rate limits in all (not counted as retries)."""
    carry: "Carry | None" = None
    """Set on runs after the first: where the previous run left off."""


@dataclass(frozen=True)
class SubAgentSpec:
    """A sub-agent declared in Options: the model sees a tool ``name`` taking a ``goal``."""

    name: str
    description: str
    task: TaskInput
    """The child's input with an empty goal (filled per call); an empty ``provider`` inherits."""


def subagent_tool(name: str, description: str) -> dict[str, Any]:
    """The tool definition the model sees for a sub-agent (provider-neutral shape)."""
    return {
        "name": name,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {"goal": {"type": "string", "description": "What the sub-agent should do."}},
            "required": ["goal"],
        },
    }


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class BudgetWarningRecord:
    """A limit reached its warning fraction (recorded once per limit, projected as BudgetWarning)."""

    limit: str
    allowed: float
    used: float


@dataclass(frozen=True)
class GoalInput:
    goal: str
    images: list[ImageBlock] = field(default_factory=list)
    goal_id: str = ""
    """Chosen by the client, so it can ask for the goal's result again in a later run."""


@dataclass(frozen=True)
class PrepareInput:
    task_id: str
    tools: list[str]
    expected_fingerprints: dict[str, str]
    system_prompt: str | None
    output_schema: OutputSchema | None = None
    validators: list[str] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    channels: list[ChannelContent] = field(default_factory=list)
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    resources: list[str] = field(default_factory=list)
    inherited_resources: dict[str, str] = field(default_factory=dict)
    scope: dict[str, Any] = field(default_factory=dict)
    """The merged scope, checked against ``scope_schema``."""
    scope_schema: OutputSchema | None = None
    agents: list[dict[str, Any]] = field(default_factory=list)
    """Tool definitions of the declared sub-agents, stored for the model calls."""
    priced_provider: str | None = None
    """Set when the task has a cost limit: the worker checks that this provider's model has a price."""
    priced_model: str | None = None


@dataclass(frozen=True)
class PrepareOutput:
    tools: list[ToolSpec]
    system_ref: ContentRef | None
    """System prompt plus stable channels."""
    output_schema_ref: ContentRef | None = None
    volatile_ref: ContentRef | None = None
    plan: ContextPlan | None = None
    mcp_tools_ref: ContentRef | None = None
    """The MCP tools of ``tools`` with their schemas, stored once for every model call."""
    resources: list[EquippedResource] = field(default_factory=list)
    """Task-scoped resources created for the task (its tools need them or its Options equip them)."""
    agents_ref: ContentRef | None = None


@dataclass(frozen=True)
class CallModelInput:
    task_id: str
    provider: str
    model: str | None
    head: ContentRef | None
    """Transcript so far, as stored by the previous call (None: empty)."""
    append: list[Message]
    """Messages added since ``head``."""
    system_ref: ContentRef | None
    tools: list[str]
    turn: int
    temperature: float | None = None
    max_tokens: int | None = None
    output_schema_ref: ContentRef | None = None
    volatile_ref: ContentRef | None = None
    thinking: dict[str, Any] | None = None
    effort: str | None = None
    mcp_tools_ref: ContentRef | None = None
    agents_ref: ContentRef | None = None
    """Sub-agent tool definitions; those named in ``tools`` are offered to the model."""
    budget: AttemptBudget | None = None
    """Set by the workflow: the worker counts attempts itself (None: Temporal's count, as before)."""
    step_key: str = ""
    """Unique per logical model call and stable across its attempts: the worker records the
    finished call under it, so an attempt retried after its completion was lost returns the
    recorded answer instead of calling the model again."""


@dataclass(frozen=True)
class CallModelOutput:
    response: LLMResponse
    """The response without ``raw`` (kept in the content store as ``raw_ref``)."""
    head: ContentRef
    """Transcript including ``append`` and the assistant message."""
    raw_ref: ContentRef | None = None
    attempt: int = 1
    retried: list[AttemptFailure] = field(default_factory=list)
    """Failures of the earlier attempts of this call."""
    priced_as: str | None = None
    """Where ``response.usage.cost_usd`` came from (``prices:<model>`` for the worker's own table,
    ``genai-prices:<provider>/<model>``); None: the model has no price and the cost is 0."""
    model: str | None = None
    """The model that answered: the request's, else the provider's default (None: not known)."""
    from_record: bool = False
    """The call had finished in an earlier attempt whose completion never reached Temporal: this
    is its recorded answer, and the model was not called again."""


@dataclass(frozen=True)
class InvokeToolInput:
    task_id: str
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    expected_fingerprint: str | None
    """None rejects the call with ``reject_reason`` (unknown tool), recorded like any result."""
    reject_reason: str | None = None
    workspace_dir: str | None = None
    validate_input: bool = False
    """The task checks arguments against input_schema (a tool's ``validate_input`` also does)."""
    mcp: McpTarget | None = None
    """Set for a remote MCP server's tool: the call goes to that server."""
    env: RunEnv | None = None
    budget: AttemptBudget | None = None
    """Set by the workflow: the worker counts attempts itself (None: Temporal's count, as before)."""
    idempotency_key: str = ""
    """Assigned by the workflow, unique per logical call whatever ids the model sent, stable across
    attempts and worker restarts (empty: ``{task_id}/{call_id}``, as before)."""


@dataclass(frozen=True)
class ToolRefusal:
    """A tool call the workflow refused without running it (recorded in the memo under
    REFUSED_MEMO_KEY): a guard denied it, a human refused it or let it time out, or no such tool."""

    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    reason: str
    """Exactly what the model is told (the failed tool result's text)."""


@dataclass(frozen=True)
class InvokeToolOutput:
    result: ToolResult
    attempt: int = 1
    retried: list[AttemptFailure] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)
    """Memories the memory tool recalled: they enter the transcript with origin "memory"."""
    resource_calls: list[ResourceCall] = field(default_factory=list)
    """Calls of instrumented resources the tool made (at most MAX_RECORDED_RESOURCE_CALLS)."""
    resource_calls_dropped: int = 0
    from_record: bool = False
    """The tool had finished in an earlier attempt whose completion never reached Temporal: this
    is its recorded result, and the tool did not run again."""


@dataclass(frozen=True)
class CheckGuardsInput:
    task_id: str
    trace_id: str
    turn: int
    guards: list[str]
    actions: list[ProposedAction]
    metadata: dict[str, Any] = field(default_factory=dict)
    """``Options.metadata``, handed to guards as ``GuardContext.metadata``."""
    env: RunEnv | None = None


@dataclass(frozen=True)
class CheckGuardsOutput:
    verdicts: list[GuardDecision]
    """Every guard's verdict on every action (allow verdicts included), in order."""


@dataclass(frozen=True)
class ApprovalInput:
    call_id: str
    approved: bool
    reason: str | None = None
    approver: str | None = None


@dataclass(frozen=True)
class ApprovalRequest:
    call_id: str
    action: ProposedAction
    reason: str | None
    guard: str


@dataclass(frozen=True)
class ValidateInput:
    task_id: str
    answer: str
    output_schema: OutputSchema | None
    validators: list[str]
    env: RunEnv | None = None


@dataclass(frozen=True)
class ReleaseInput:
    """The task-scoped resources to destroy when the task ends."""

    task_id: str
    keys: list[str]


@dataclass(frozen=True)
class ReleaseOutput:
    released: list[str]
    """Keys destroyed by the worker that ran the release (created there, in reverse order)."""
    errors: list[str] = field(default_factory=list)
    """``key: error`` for each ``destroy`` that raised (the task's outcome stands)."""


@dataclass(frozen=True)
class ValidateOutput:
    ok: bool
    data: Any = None
    """The parsed (and, with a schema, validated) answer as JSON values."""
    issue: str | None = None
    failure_type: Literal["schema", "validator"] | None = None


def validation_feedback(issue: str) -> str:
    """The message that tells the model why its answer was rejected (shared with the projection)."""
    return f"Your answer was rejected: {issue}\nAnswer again, fixing this."


def finish_denied_feedback(reason: str) -> str:
    """What the model is told when a guard or a human refuses to let it finish."""
    return f"You may not finish yet: {reason}\nContinue the task."


def denied_by_guard(guard: str, reason: str | None) -> str:
    return f"Denied by guard {guard!r}: {reason or 'no reason given'}"


def not_approved(decision: ApprovalInput) -> str:
    return f"Not approved by {decision.approver or 'a human'}: {decision.reason or 'no reason given'}"


def approval_timed_out(call_id: str, timeout_seconds: float) -> ApprovalInput:
    """The refusal recorded when nobody answers an approval in time."""
    return ApprovalInput(call_id, approved=False, reason=f"no answer within {timeout_seconds:g}s", approver="timeout")


def refused_result(refusal: ToolRefusal) -> ToolResultBlock:
    """The failed tool result the model gets for a refused call (shared with the projection)."""
    return ToolResultBlock(call_id=refusal.call_id, output=refusal.reason, success=False, error=refusal.reason)


def tool_failed_text(tool_name: str, reason: str) -> str:
    """What the model is told when a tool call's activity failed for good (retries, timeouts)."""
    return f"tool {tool_name!r} failed after retries: {reason}"


def subtask_output(result: TaskResult) -> str:
    """What the parent's transcript gets from a child that completed: its structured data as JSON
    when it has an output schema, else its answer (shared with the projection)."""
    if result.data is None:
        return result.answer
    return json.dumps(result.data, ensure_ascii=False, separators=(",", ":"))
