"""The inputs and outputs of the worker's activities: history stores exactly these, so they stay
small. Transcripts travel as a content-store reference (``head``) plus the messages added since
the last call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from noeta.protocols.attempts import AttemptBudget, AttemptFailure
from noeta.protocols.channels import ChannelContent, ContextPlan
from noeta.protocols.hooks import GuardDecision, ProposedAction
from noeta.protocols.elicitation import ElicitationAnswer
from noeta.protocols.mcp import McpServerConfig, McpTarget
from noeta.protocols.messages import ContentRef, LLMResponse, Message, Usage
from noeta.protocols.sampling import SampledAnswer, SamplingCall
from noeta.protocols.resources import EquippedResource, ResourceCall, RunEnv
from noeta.protocols.tool import ToolResult, ToolSpec
from noeta.protocols.validation import OutputSchema


@dataclass(frozen=True, slots=True)
class PrepareInput:
    """The input of ``prepare``: what the task asks for (tools with the fingerprints it expects,
    system prompt, output schema, validators, guards, channels, MCP servers, resources), checked
    and stored once before its first model call."""
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
    fallback_providers: list[str] = field(default_factory=list)
    """Registry names of the task's fallback providers: each must be registered on the worker."""
    compactor: str | None = None
    """The registered compactor the task's ``Compaction(strategy="function")`` names: it must be on
    the worker before the first model call."""


@dataclass(frozen=True, slots=True)
class PrepareOutput:
    """What ``prepare`` found and stored: the tools' specs, the references of the system prompt and
    schemas, the context plan and the resources it equipped."""
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
    shape: int = 0
    """The workflow shape of the worker that prepared the task (PREPARED_SHAPE,
    noeta.protocols.names); 0 in histories recorded before shapes existed."""


@dataclass(frozen=True, slots=True)
class CompactedContext:
    """What a model sees of a compacted transcript: the stored messages of ``view`` instead of the
    transcript's first ``folded`` messages, then the rest of the transcript as it is."""
    folded: int
    """How many of the transcript's first messages ``view`` stands for."""
    view: ContentRef
    """A stored JSON list of messages (noeta.context.compaction): the stable prefix, then a summary,
    previews or whatever a compactor returned."""


@dataclass(frozen=True, slots=True)
class CompactContextInput:
    """The input of ``compact_context``: the transcript as a model call would get it (the stored
    head, the messages added since, the current compacted view), the window's budget and the
    strategy."""
    task_id: str
    provider: str
    model: str | None
    head: ContentRef | None
    append: list[Message]
    context: CompactedContext | None
    strategy: str
    tokens_before: int
    """The workflow's count of the request about to be sent (reported usage plus estimate)."""
    keep_tokens: int
    """The newest turns are kept word for word up to about this many tokens."""
    target_tokens: int
    """What the compacted request should stay under (the threshold of the window)."""
    reason: Literal["threshold", "context_length"] = "threshold"
    function: str | None = None
    summary_max_tokens: int = 1024
    preview_chars: int = 200
    budget: AttemptBudget | None = None
    step_key: str = ""
    """The compaction's step: a summary once written is recorded under it and never asked again."""
    window_tokens: int | None = None
    """The window the workflow planned with (the model's, or one a refusal taught; None: not known,
    as in inputs recorded before the field): the summarizing request must fit it."""
    call: CallModelInput | None = None
    """The model call being fitted, without its transcript (``head``, ``append`` and ``context`` are
    this input's): the summarizing request is built as that call's request, cut where the folded
    turns end, so it starts with the same bytes and the provider's prefix cache serves it (None:
    the folded turns as text under the summarizing instruction, as inputs recorded before)."""


@dataclass(frozen=True, slots=True)
class CompactContextOutput:
    """What ``compact_context`` did: the new view (None: nothing could be folded), how many turns
    and messages it folded, the tokens before and after, and what a summary cost."""
    context: CompactedContext | None
    strategy: str
    tokens_before: int
    tokens_after: int
    turns_folded: int = 0
    messages_folded: int = 0
    """Messages of the transcript newly folded into the view."""
    summary: str | None = None
    """The summary written (strategy "summarize"), as the model sees it (bounded by the task's
    ``summary_max_tokens``)."""
    summary_ref: ContentRef | None = None
    """The same summary in the content store."""
    usage: Usage = field(default_factory=Usage)
    """Tokens the summarizing call used."""
    attempt: int = 1
    retried: list[AttemptFailure] = field(default_factory=list)
    """Failures of the earlier attempts of this compaction."""
    from_record: bool = False
    """An earlier attempt had finished: this is its recorded output."""


@dataclass(frozen=True, slots=True)
class CallModelInput:
    """The input of ``call_model``: the provider and model, the transcript as a stored head plus the
    messages added since, and the references ``prepare`` stored."""
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
    max_tool_output_tokens: int | None = None
    """The task's cap on each tool result in the request (None: none, as in calls recorded before
    the cap existed); applied by the worker as it builds the request (noeta.protocols.tool_output_cap)."""
    context: CompactedContext | None = None
    """Set once the task's context was compacted: what the model sees of the transcript's
    beginning (None: the whole transcript, as before)."""
    listened_until: float | None = None
    """Until when (epoch seconds) a reader of an earlier release had said it listens to the task's
    stream. Unused: a call publishes its pieces whether or not anyone reads them (the field stays so
    that inputs of either release read the same)."""
    may_have_run: bool = False
    """The call may have run before as a local activity of a workflow task that was lost (a task
    with ``model_local_activity``): even its first attempt looks for the step's record."""
    sampling: SamplingCall | None = None
    """Set when the call answers an MCP server's sampling request rather than the task's
    conversation (noeta.protocols.sampling): its answer joins no transcript."""


@dataclass(frozen=True, slots=True)
class CallModelOutput:
    """What ``call_model`` returns: the response (its raw form stored apart), the transcript's new
    head, and the attempts it took."""
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


@dataclass(frozen=True, slots=True)
class InvokeToolInput:
    """The input of ``invoke_tool``: one tool call of the model, with the fingerprint the task
    recorded for the tool (or why it is rejected)."""
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
    elicitation_answers: list[ElicitationAnswer] = field(default_factory=list)
    """A remote MCP tool made again after its server asked a person: the answers so far, returned
    to the server's questions in order (noeta.protocols.elicitation)."""
    sampled: list[SampledAnswer] = field(default_factory=list)
    """A remote MCP tool made again after its server asked the task's model: the answers so far,
    returned to the server's sampling requests in order (noeta.protocols.sampling)."""
    elicitation_hold_seconds: float = 0.0
    """A remote MCP tool: how long a question its server asks is held open for a person's answer
    (noeta.protocols.held_questions); 0: the call stops at the question."""


@dataclass(frozen=True, slots=True)
class InvokeToolOutput:
    """What ``invoke_tool`` returns: the tool's result, the attempts it took, recalled memories and
    the resource calls it made."""
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


@dataclass(frozen=True, slots=True)
class CheckGuardsInput:
    """The input of ``check_guards``: the actions of one turn and the guards that must judge each.
    """
    task_id: str
    trace_id: str
    turn: int
    guards: list[str]
    actions: list[ProposedAction]
    metadata: dict[str, Any] = field(default_factory=dict)
    """``Options.metadata``, handed to guards as ``GuardContext.metadata``."""
    env: RunEnv | None = None
    second_look: bool = False
    """The guards' second look at a call an approver edited: an ``ask`` waits for nobody (no
    approval is counted or notified)."""


@dataclass(frozen=True, slots=True)
class CheckGuardsOutput:
    """What ``check_guards`` returns."""
    verdicts: list[GuardDecision]
    """Every guard's verdict on every action (allow verdicts included), in order."""


@dataclass(frozen=True, slots=True)
class ValidateInput:
    """The input of ``validate_output``: a final answer, to check against the output schema and the
    validators."""
    task_id: str
    answer: str
    output_schema: OutputSchema | None
    validators: list[str]
    env: RunEnv | None = None


@dataclass(frozen=True, slots=True)
class ReleaseInput:
    """The task-scoped resources to destroy when the task ends."""

    task_id: str
    keys: list[str]


@dataclass(frozen=True, slots=True)
class ReleaseOutput:
    """What the release of a task's resources did."""
    released: list[str]
    """Keys destroyed by the worker that ran the release (created there, in reverse order)."""
    errors: list[str] = field(default_factory=list)
    """``key: error`` for each ``destroy`` that raised (the task's outcome stands)."""


@dataclass(frozen=True, slots=True)
class ValidateOutput:
    """What ``validate_output`` found: ``ok`` with the parsed data, or the issue and which check
    raised it."""
    ok: bool
    data: Any = None
    """The parsed (and, with a schema, validated) answer as JSON values."""
    issue: str | None = None
    failure_type: Literal["schema", "validator"] | None = None


@dataclass(frozen=True, slots=True)
class LoadTranscriptInput:
    """The input of ``load_transcript``: the stored head to read back when a run resumes, and how
    much of it to return at most."""
    head: ContentRef | None
    max_bytes: int = 1_000_000


@dataclass(frozen=True, slots=True)
class LoadTranscriptOutput:
    """What ``load_transcript`` returns: the newest messages that fit ``max_bytes``."""
    messages: list[Message]
    omitted: int = 0
    """Oldest messages left out to keep the payload small (the provider still gets them all)."""


__all__ = [
    "CallModelInput",
    "CallModelOutput",
    "CheckGuardsInput",
    "CheckGuardsOutput",
    "CompactContextInput",
    "CompactContextOutput",
    "CompactedContext",
    "InvokeToolInput",
    "InvokeToolOutput",
    "LoadTranscriptInput",
    "LoadTranscriptOutput",
    "PrepareInput",
    "PrepareOutput",
    "ReleaseInput",
    "ReleaseOutput",
    "ValidateInput",
    "ValidateOutput",
]
