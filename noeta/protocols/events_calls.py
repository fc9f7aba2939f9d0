"""Event-log payloads of the calls a task makes: model calls, tool calls (and the resources they
use) and sub-agents, with their attempts. Catalogue and public names (its ``__all__``):
:mod:`noeta.protocols.event_log`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.protocols.messages import Usage
from noeta.protocols.resources import ResourceCall
from noeta.protocols.server_requests import ServerRequest


@dataclass(frozen=True, slots=True)
class ProviderCallEvent:
    """What every event of a model call leads with: the provider it is made on."""
    provider: str


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """What every event of a tool call leads with: the call's id and its tool."""
    call_id: str
    tool_name: str


@dataclass(frozen=True, slots=True)
class ProviderCallStarted(ProviderCallEvent):
    """A model call begins: provider, model, the goal's turn and how many messages were added since
    the last call."""
    model: str | None
    turn: int
    messages_appended: int
    local: bool = False
    """The call runs as a local activity (``model_local_activity``): it started and ended within one
    marker."""


@dataclass(frozen=True, slots=True)
class ProviderCallRetried(ProviderCallEvent):
    """An attempt of a model call failed and the call is retried (after ``retry_after`` seconds when
    the provider said so)."""
    attempt: int
    """The attempt that failed."""
    error: str
    error_type: str | None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class ProviderCallCompleted(ProviderCallEvent):
    """A model call finished: why the model stopped, the tokens it used and the attempt that
    succeeded."""
    stop_reason: str
    usage: Usage
    attempt: int
    local: bool = False
    """The call ran as a local activity (``model_local_activity``)."""


@dataclass(frozen=True, slots=True)
class ProviderCallFailed(ProviderCallEvent):
    """A model call failed for good: its last error and attempt."""
    error: str
    error_type: str | None
    attempt: int
    local: bool = False
    """The call ran as a local activity (``model_local_activity``)."""


@dataclass(frozen=True, slots=True)
class ProviderFallback:
    """A model call failed on the task's provider in a way another may not share, and the task
    moved to its next fallback provider, for this call and the rest of the task."""
    from_provider: str
    from_model: str | None
    to_provider: str
    to_model: str | None
    """None: that provider's default model."""
    error_type: str
    """The type of the error the call failed with (AttemptsExhaustedError, ProviderError...)."""
    error: str
    turn: int
    """The task's model call (counted over all its runs) that moved."""


@dataclass(frozen=True, slots=True)
class ToolCallProposed(ToolCallEvent):
    """The model asked for a tool call (guards may still refuse it)."""
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallStarted(ToolCallEvent):
    """A tool call's activity was scheduled: the tool is about to run."""
    arguments: dict[str, Any]
    local: bool = False
    """The call runs as a local activity (a local tool): it started and ended within one marker."""


@dataclass(frozen=True, slots=True)
class ToolCallRetried(ToolCallEvent):
    """An attempt of a tool call failed and the call is retried."""
    attempt: int
    error: str
    error_type: str | None


@dataclass(frozen=True, slots=True)
class ResourceCallObserved(ResourceCall):
    """A call an instrumented resource recorded while a tool ran (the ResourceCall: operation,
    duration, outcome and derived fields), and the tool call that made it."""
    call_id: str = field(kw_only=True)
    """The tool call that made it."""
    tool_name: str = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class ToolCallCompleted(ToolCallEvent):
    """A tool call finished; ``success`` is the tool's own verdict on its result."""
    success: bool
    attempt: int
    summary: str | None = None
    resource_calls_dropped: int = 0
    """Calls of instrumented resources beyond those recorded (ResourceCallObserved)."""
    local: bool = False
    """The call ran as a local activity (a local tool: ``@tool(local=True)``, or an MCP server
    configured ``local``)."""


@dataclass(frozen=True, slots=True)
class ToolCallFailed(ToolCallEvent):
    """A tool call failed for good (its retries ran out or the error was not retryable)."""
    error: str
    error_type: str | None
    attempt: int
    local: bool = False
    """The call ran as a local activity (a local tool)."""


@dataclass(frozen=True, slots=True)
class SubtaskSpawned:
    """A sub-agent call started a child task."""
    call_id: str
    goal: str
    child_task_id: str
    agent: str | None = None
    """The declared sub-agent it runs, if any."""


@dataclass(frozen=True, slots=True)
class SubtaskCompleted:
    """A child task ended; its answer (or failure) is the result of the call that spawned it."""
    call_id: str
    child_task_id: str
    success: bool
    answer: str
    usage: Usage | None = None
    """Tokens the child used (rolled up into the parent's usage); None when it failed."""
    data: Any = None
    """The child's structured output, when its options have an output schema."""



@dataclass(frozen=True, slots=True)
class SamplingRequested(ServerRequest):
    """A remote MCP server asked the task's model during a tool call (``sampling/createMessage``):
    the call stopped; the request goes to the task's guards, then a model call of the task answers
    it (ProviderCallStarted/Completed, counted in the task's usage) and the call is made again."""
    messages: int
    """How many messages the server sent."""
    max_tokens: int | None = None
    """The most tokens the server asked for."""


@dataclass(frozen=True, slots=True)
class SamplingAnswered:
    """The task's model answered an MCP server's sampling request; the answer goes back to the
    server when the tool call is made again (it joins none of the task's transcript)."""
    call_id: str
    server: str
    text: str
    stop_reason: str | None = None
