"""TaskSettings: the task settings that travel to the workflow as they are, declared once.

``Options`` (what a caller writes) and ``TaskInput`` (what the workflow receives) both inherit these
fields, so each has one declaration, one default and one description. A setting that needs a
serializable form first (tools, the policy, output schemas, sub-agents...) stays on ``Options``
and becomes its own ``TaskInput`` field when the task starts (noeta.client.options). The HTTP API's
request body derives its fields from here too (noeta.client.settings_body).

The defaults are part of the wire format: a recorded ``TaskInput`` leaves out fields at their
defaults (noeta.temporal.converter), so a default never changes (tests/wire_defaults.json pins them).

Each setting's rules are on its field: its type, its default and, for a number, its range
(``setting(50, ge=1, le=10_000)``, noeta.protocols.setting), with its help in the docstring under it.
The range checks (noeta.protocols.bounds), the HTTP body's OpenAPI schema, the CLI's flags and the
console's form derive from them, so a new setting is one field here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from noeta.errors import ConfigurationError
from noeta.protocols.activity_options import ActivityOptions
from noeta.protocols.budget import UsageLimits
from noeta.protocols.compaction import Compaction
from noeta.protocols.held_questions import DEFAULT_HOLD_SECONDS
from noeta.protocols.names import DEFAULT_INDEX_INTERVAL_SECONDS
from noeta.protocols.setting import DAY, setting
from noeta.protocols.tool_output_cap import DEFAULT_MAX_TOOL_OUTPUT_TOKENS, MIN_TOOL_OUTPUT_TOKENS

#: Reasoning efforts a task may ask for (the union of OpenAI's and Anthropic's values).
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
#: ``model_timeout_seconds``' default: a value other than it is a deprecated way to set
#: ``model_activity.start_to_close_seconds``.
MODEL_TIMEOUT_SECONDS = 300.0


# Keyword-only: the fields of Options and TaskInput come after the ones declared here, and a
# TaskInput's goal and provider stay its first positional arguments.
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSettings:
    """The settings a task's Options carry unchanged into its TaskInput. Every field has a working
    default."""

    system_prompt: str | None = None
    """The system prompt (at most 256 KiB; reference material belongs in a stable content channel
    or behind a tool)."""
    model: str | None = None
    """Model name passed to the provider (None: the provider's default)."""
    max_turns: int = setting(50, ge=1, le=10_000)
    """Model calls allowed per goal; beyond it the goal ends with status "failed"."""
    # Retries beyond 100 are a mistake, not a policy (each retry waits up to a minute).
    max_retries: int = setting(3, ge=0, le=100)
    """The seed's ``maxRetries``: how often a final answer that fails its output schema or a
    validator is sent back to the model before AttemptsExhaustedError. Also the retries of model
    and tool calls unless ``provider_retries`` / ``tool_retries`` say otherwise."""
    provider_retries: int | None = setting(None, ge=0, le=100)
    """Retries after the first attempt of each model call (None: ``max_retries``)."""
    tool_retries: int | None = setting(None, ge=0, le=100)
    """Retries after the first attempt of each tool call (None: ``max_retries``; a tool's own
    ``@tool(max_retries=)`` wins)."""
    validate_tool_input: bool = False
    """Check every tool call's arguments against the tool's input_schema and send a mismatch back
    to the model as a failed result. Off by default (the seed's): input_schema is metadata for the
    model, not a runtime validator (``@tool(validate_input=True)`` turns it on for one tool)."""
    thinking: dict[str, Any] | None = None
    """Extended thinking, Anthropic-shaped: ``{"type": "enabled", "budget_tokens": N}``,
    ``{"type": "adaptive"}`` or ``{"type": "disabled"}`` (docs/providers.md)."""
    effort: str | None = setting(None, choices=EFFORTS)
    """Reasoning effort: one of ``EFFORTS`` (OpenAI ``reasoning_effort``,
    Anthropic ``output_config.effort``)."""
    temperature: float | None = setting(None, ge=0, le=2)
    """Sampling temperature, 0 to 2 (None: the provider's default)."""
    max_tokens: int | None = setting(None, ge=1, le=10_000_000)
    """Most output tokens of one model call (None: the provider's default)."""
    model_timeout_seconds: float = setting(MODEL_TIMEOUT_SECONDS, gt=0, le=7 * DAY, deprecated=True)
    """Deprecated: set ``model_activity=ActivityOptions(start_to_close_seconds=...)``. Still
    honoured: the start-to-close timeout of one model-call attempt when ``model_activity`` sets none."""
    tool_timeout_seconds: float = setting(300.0, gt=0, le=7 * DAY)
    """Default start-to-close timeout of one tool-call attempt, also of remote MCP tools and output
    validation when their activity options set none (``@tool(timeout_seconds=)`` wins)."""
    metadata: dict[str, Any] = setting(default_factory=dict)
    """Free-form JSON carried with the task; keys listed in NOETA_INDEXED_METADATA are searchable."""
    approval_timeout_seconds: float = setting(DAY, gt=0, le=366 * DAY)
    """How long an action a guard sent for approval waits for a human before it is denied."""
    # Above an hour a held request would outlive most servers' patience and the attempt's time.
    elicitation_hold_seconds: float = setting(DEFAULT_HOLD_SECONDS, ge=0, le=3600)
    """How long a remote MCP tool call whose server asks a person (elicitation) keeps the server's
    request open for the answer before it stops and the task waits durably (at most half the
    call's attempt time and ``approval_timeout_seconds``; 0: stop at once). An answer within it
    reaches the server on the request that asked (docs/mcp.md)."""
    # A step takes ~12 events; the server terminates a run at 51,200.
    max_history_events: int | None = setting(None, ge=20, le=50_000)
    """Continue the task in a new run once a run's history has this many events (None: when
    Temporal suggests it, ~4,096 events or 4 MiB). The task id, transcript and event seq carry on."""
    limits: UsageLimits | None = None
    """Ceilings on tokens, calls, time and cost for the whole task (continued runs and sub-agents
    included), checked before every model call, tool round and subtask; reaching one fails the
    task with BudgetExceededError (docs/budgets.md). A sub-agent gets what is left of its parent's."""
    index_interval_seconds: float | None = setting(DEFAULT_INDEX_INTERVAL_SECONDS, ge=1, le=DAY)
    """How often a running task refreshes its turn, token and cost search attributes between status
    changes (which are always indexed at once). Each refresh is a history event and a write to the
    cluster's visibility store; None: only with status changes and at the end."""
    rate_limit_wait_seconds: float = setting(600.0, ge=0, le=DAY)
    """Most time one model or tool call may spend waiting on rate limits in all (a provider's 429
    and its retry-after, the worker's provider limiter, a full sync-tool pool) before it fails
    with AttemptsExhaustedError. These waits do not use up ``max_retries``."""
    store_outage_wait_seconds: float = setting(120.0, ge=0, le=DAY)
    """Most time one model or tool call may wait in all for a content store it cannot reach
    (PostgreSQL stopped, a partition) to come back, trying again every few seconds; past it the
    call fails with ContentStoreError (cause "unreachable"). These waits do not use up
    ``max_retries`` (a full store or a refused permission does)."""
    # Below 1,024 a preview would be mostly its note; above 10M it is no cap.
    max_tool_output_tokens: int | None = setting(DEFAULT_MAX_TOOL_OUTPUT_TOKENS, ge=MIN_TOOL_OUTPUT_TOKENS, le=10_000_000)
    """Most of one tool result the model is sent, in tokens as compaction counts them (and at most
    8 bytes a token; at least 1,024; None: no cap). A longer output reaches the model as its start
    and end around a note that the rest is stored; the transcript and ``messages()`` keep it whole
    (docs/long-running.md)."""
    model_activity: ActivityOptions = setting(default_factory=ActivityOptions)
    """Timeouts, heartbeat and retry backoff of model calls; start-to-close defaults to 300 s. Each
    kind's defaults: noeta.protocols.activity_options, docs/retries.md."""
    model_local_activity: bool = False
    """Run each model call as a Temporal local activity, on the worker that runs the task's workflow:
    one history event per call instead of three and no round trip through the server's activity
    queue. For fast models only: an attempt is bounded (30 s unless ``model_activity`` sets a
    start-to-close timeout, at most 120 s), cannot heartbeat, and a lost worker is noticed after the
    workflow task's 10 s timeout (noeta.protocols.local_model_calls, docs/runtime.md)."""
    tool_activity: ActivityOptions = setting(default_factory=ActivityOptions)
    """The same for tool calls; start-to-close defaults to ``tool_timeout_seconds``. A tool's own
    ``@tool(timeout_seconds=, heartbeat_seconds=)`` wins for that tool."""
    mcp_activity: ActivityOptions = setting(default_factory=ActivityOptions)
    """The same for remote MCP servers' tools; start-to-close defaults to ``tool_timeout_seconds``."""
    guard_activity: ActivityOptions = setting(default_factory=ActivityOptions)
    """The same for guard checks; start-to-close defaults to 60 s (raise it for guards that do slow I/O)."""
    validator_activity: ActivityOptions = setting(default_factory=ActivityOptions)
    """The same for output validation; start-to-close defaults to ``tool_timeout_seconds``."""
    context_window_tokens: int | None = setting(None, ge=256, le=100_000_000)
    """The model's context window in tokens (None: the built-in table of the providers' current
    models, noeta.protocols.context_window; a model not in it is compacted only when its provider
    answers that a request is too long)."""
    # Temporal's priority keys: 1 runs first; unset is its default level, 3 (noeta.client.priority).
    priority: int | None = setting(None, ge=1, le=5)
    """How urgent the task is, 1 (first) to 5 (last); None: 3, Temporal's default. Its workflow
    tasks, activities and sub-agents wait on the task queue behind those of more urgent tasks
    (Temporal's task-queue priority; docs/fairness.md). A schedule's runs take its Options'."""
    compaction: Compaction | None = setting(default_factory=Compaction)
    """When and how the context is compacted before a model call would pass its window's threshold
    (docs/long-running.md): on by default, summarizing the oldest turns at 80 % of the window.
    None: never (a request too long for the window fails the task with ContextLengthError)."""


def settings_values(settings: TaskSettings) -> dict[str, Any]:
    """The TaskSettings fields of ``settings`` (an Options, a TaskInput) by name, as keyword
    arguments for another of them. Mappings are copied into dicts: a caller's mapping may be of
    any type, and the copy is not shared with it."""
    values = {}
    for item in fields(TaskSettings):
        value = getattr(settings, item.name)
        values[item.name] = dict(value) if isinstance(value, Mapping) else value
    return values


_THINKING_TYPES = ("enabled", "adaptive", "disabled")


def check_thinking(thinking: Any) -> None:
    """Raise ConfigurationError unless ``thinking`` is None or a mapping whose ``type`` is enabled, adaptive
    or disabled."""
    if thinking is None:
        return
    if not isinstance(thinking, Mapping) or thinking.get("type") not in _THINKING_TYPES:
        raise ConfigurationError(
            f"thinking must be a mapping whose type is one of {', '.join(_THINKING_TYPES)}, got {thinking!r}"
        )
    budget = thinking.get("budget_tokens")
    if thinking["type"] == "enabled" and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1024):
        raise ConfigurationError("thinking of type 'enabled' needs budget_tokens, an int >= 1024")



__all__ = ["EFFORTS", "MODEL_TIMEOUT_SECONDS", "TaskSettings", "check_thinking", "settings_values"]
