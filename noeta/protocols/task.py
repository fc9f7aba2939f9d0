"""A task's input: what it is configured with when it starts, checked before its first step. This
module also re-exports the types that cross the workflow boundary (they live in
noeta.protocols.activity_io, attempts, channels, interaction, run_state, feedback and
step_failures), so older imports from here keep working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.protocols import activity_io
from noeta.protocols.activity_io import *  # noqa: F403  (re-exported for older imports)
from noeta.protocols.activity_options import DEFAULT_HEARTBEAT_SECONDS, ActivityOptions
from noeta.protocols.attempts import (
    MAX_LOST_ATTEMPTS,
    SAFETY_NET_EXTRA_ATTEMPTS,
    AttemptBudget,
    AttemptFailure,
    AttemptKind,
    attempts_cap,
)
from noeta.protocols.channels import ChannelContent, ChannelUse, ContextPlan
from noeta.protocols.fallback import ProviderChoice
from noeta.protocols.forks import ForkPoint
from noeta.protocols.feedback import (
    TIMEOUT_APPROVER,
    approval_timed_out,
    denied_by_guard,
    finish_denied_feedback,
    not_approved,
    refused_result,
    subtask_output,
    tool_failed_text,
    validation_feedback,
)
from noeta.protocols.interaction import ApprovalInput, ApprovalRequest, GoalInput, InjectInput, TaskResult
from noeta.protocols.mcp import McpServerConfig
from noeta.protocols.messages import ImageBlock
from noeta.protocols.names import INDEX_INTERVAL_SECONDS
from noeta.protocols.run_state import BudgetWarningRecord, Carry, ToolRefusal
from noeta.protocols.scope import ScopeLevel
from noeta.protocols.scoring import ScoringPlan
from noeta.protocols.task_settings import TaskSettings
from noeta.protocols.step_failures import CONFIGURATION_ERRORS, TASK_FATAL_TOOL_ERRORS
from noeta.protocols.validation import OutputSchema

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


@dataclass(frozen=True, slots=True)
class PolicyRef:
    """A policy class by import path (``module:QualName``) and its constructor arguments."""

    path: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskInput(TaskSettings):
    """The workflow's input: the task's settings (TaskSettings, declared once with Options) and
    the serializable forms of what Options holds as objects (tools, policy, schemas, sub-agents)."""

    goal: str
    provider: str
    """Name of the provider in the worker's registry."""
    images: list[ImageBlock] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    tool_fingerprints: dict[str, str] = field(default_factory=dict)
    """Fingerprints the starter expects; the worker's tools must match them."""
    policy: PolicyRef | None = None
    keep_open: bool = False
    """Stay open after the first goal and take further goals through ``send_goal``."""
    trace_id: str | None = None
    workspace_dir: str | None = None
    output_schema: OutputSchema | None = None
    validators: list[str] = field(default_factory=list)
    """Names of validators in the worker's registry, run in order on the final answer."""
    index: bool = False
    """Keep the SEARCH_ATTRIBUTES up to date (only when the cluster has them registered)."""
    guards: list[str] = field(default_factory=list)
    """Names of guards in the worker's registry, consulted before every tool call, subtask and finish."""
    channels: list[ChannelContent] = field(default_factory=list)
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
    index_cost: bool = False
    """Also keep NoetaCostUSD up to date (the cluster has it registered)."""
    index_interval_seconds: float | None = field(default=INDEX_INTERVAL_SECONDS, kw_only=True)
    """As TaskSettings', but a payload without it decodes to what tasks started before the field
    was recorded used: the wire default differs from the one new tasks get from Options."""
    fallback_providers: list[ProviderChoice] = field(default_factory=list)
    """Providers (registry names, with a model each) to move to, in order, when a model call fails
    on the current one in a way another may not share (noeta.protocols.fallback)."""
    carry: "Carry | None" = None
    """Set on runs after the first: where the previous run left off."""
    fork: "ForkPoint | None" = None
    """Set on a forked task: the source's recorded transcript it starts from instead of its goal
    (see noeta.protocols.forks)."""
    goal_id: str = ""
    """The first goal's id, chosen by the client (``Client.send``'s request id): a ``send_goal``
    with it is that goal's caller following it, not a second goal."""
    scoring: "ScoringPlan | None" = None
    """Online scoring (``Options.scoring``): when the task ends, the worker's scorers score it if
    its id is in the sample, and the scores are recorded (TaskScored)."""


@dataclass(frozen=True, slots=True)
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


__all__ = [
    "CONFIGURATION_ERRORS",
    "DEFAULT_HEARTBEAT_SECONDS",
    "MAX_CONTEXT_BYTES",
    "MAX_GOAL_BYTES",
    "MAX_INJECTED_CHARS_PER_STEP",
    "MAX_INJECTION_CHARS",
    "MAX_LOST_ATTEMPTS",
    "MAX_QUEUED_INJECTION_BYTES",
    "MAX_SYSTEM_PROMPT_BYTES",
    "SAFETY_NET_EXTRA_ATTEMPTS",
    "TASK_FATAL_TOOL_ERRORS",
    "ActivityOptions",
    "ApprovalInput",
    "ApprovalRequest",
    "AttemptBudget",
    "AttemptFailure",
    "AttemptKind",
    "BudgetWarningRecord",
    "Carry",
    "ChannelContent",
    "ChannelUse",
    "ContextPlan",
    "ForkPoint",
    "GoalInput",
    "InjectInput",
    "OutputSchema",
    "PolicyRef",
    "SubAgentSpec",
    "TaskInput",
    "TaskResult",
    "ToolRefusal",
    "TIMEOUT_APPROVER",
    "approval_timed_out",
    "attempts_cap",
    "denied_by_guard",
    "finish_denied_feedback",
    "not_approved",
    "refused_result",
    "subagent_tool",
    "subtask_output",
    "tool_failed_text",
    "validation_feedback",
]
__all__ += activity_io.__all__
