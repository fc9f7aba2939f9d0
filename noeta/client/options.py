"""Options: everything a task is configured with, and where each extension mounts.

Validated when constructed, so bad input fails before any token is spent. (Longer than most
modules on purpose: every field is documented where it is declared, in one class.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel

from noeta.client.host import HostConfig
from noeta.client.task_input import build_task_input, check_goal, output_schema_spec, policy_ref, subagent_specs
from noeta.context.content_channel import ContentKindSpec
from noeta.errors import ConfigurationError, PayloadTooLargeError
from noeta.mcp.config import is_remote, parse_server
from noeta.protocols.activity_options import ActivityOptions
from noeta.protocols.bounds import settings_problem
from noeta.protocols.budget import UsageLimits
from noeta.protocols.channels import ChannelContent
from noeta.protocols.event_log import Observer
from noeta.protocols.hooks import Guard
from noeta.protocols.mcp import McpServerConfig
from noeta.protocols.messages import LLMProvider
from noeta.protocols.names import DEFAULT_INDEX_INTERVAL_SECONDS
from noeta.protocols.policy import Policy
from noeta.protocols.resources import ResourceSpec
from noeta.protocols.scope import check_scope
from noeta.protocols.task import MAX_CONTEXT_BYTES, MAX_GOAL_BYTES, MAX_SYSTEM_PROMPT_BYTES
from noeta.protocols.tool import Tool
from noeta.protocols.validation import Validator, as_validator

#: Reasoning efforts a task may ask for (the union of OpenAI's and Anthropic's values).
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_THINKING_TYPES = ("enabled", "adaptive", "disabled")


def check_thinking(thinking: Any) -> None:
    if thinking is None:
        return
    if not isinstance(thinking, Mapping) or thinking.get("type") not in _THINKING_TYPES:
        raise ConfigurationError(
            f"thinking must be a mapping whose type is one of {', '.join(_THINKING_TYPES)}, got {thinking!r}"
        )
    budget = thinking.get("budget_tokens")
    if thinking["type"] == "enabled" and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1024):
        raise ConfigurationError("thinking of type 'enabled' needs budget_tokens, an int >= 1024")


@dataclass(frozen=True)
class Options:
    """How a task runs. Every field has a working default."""

    system_prompt: str | None = None
    model: str | None = None
    """Model name passed to the provider (None: the provider's default)."""
    provider: str | LLMProvider | None = None
    """A provider object (runs in the in-process worker) or the registry name of a worker's provider."""
    allowed_tools: Sequence[Tool | str] = ()
    """Tools the agent may call: @tool objects, or names registered on the worker."""
    mcp_servers: Mapping[str, Any] = field(default_factory=dict)
    """MCP servers by alias. In-process ones from ``create_sdk_mcp_server`` keep their tools' bare
    names. Remote ones are configurations, ``{"type": "stdio", "command": ..., "args": [...], "env":
    {...}}`` or ``{"type": "http", "url": ..., "headers": {...}}``, whose tools the model sees as
    ``mcp__{alias}__{tool}``; secrets in them are ``${MCP_*}`` references to the worker's
    environment (docs/mcp.md)."""
    max_turns: int = 50
    """Model calls allowed per goal; beyond it the goal ends with status "failed"."""
    max_retries: int = 3
    """The seed's ``maxRetries``: how often a final answer that fails its output schema or a
    validator is sent back to the model before AttemptsExhaustedError. Also the retries of model
    and tool calls unless ``provider_retries`` / ``tool_retries`` say otherwise."""
    provider_retries: int | None = None
    """Retries after the first attempt of each model call (None: ``max_retries``)."""
    tool_retries: int | None = None
    """Retries after the first attempt of each tool call (None: ``max_retries``; a tool's own
    ``@tool(max_retries=)`` wins)."""
    validate_tool_input: bool = False
    """Check every tool call's arguments against the tool's input_schema and send a mismatch back
    to the model as a failed result. Off by default: input_schema is metadata for the model, not a
    runtime validator (``@tool(validate_input=True)`` turns it on for one tool)."""
    thinking: Mapping[str, Any] | None = None
    """Extended thinking, Anthropic-shaped: ``{"type": "enabled", "budget_tokens": N}``,
    ``{"type": "adaptive"}`` or ``{"type": "disabled"}`` (docs/providers.md)."""
    effort: str | None = None
    """Reasoning effort: one of ``EFFORTS`` (OpenAI ``reasoning_effort``, Anthropic
    ``output_config.effort``)."""
    policy: Policy | None = None
    """A custom Policy (an importable class); default: the LLM policy."""
    temperature: float | None = None
    max_tokens: int | None = None
    model_timeout_seconds: float = 300.0
    """Start-to-close timeout of one model-call attempt."""
    tool_timeout_seconds: float = 300.0
    """Default start-to-close timeout of one tool-call attempt (``@tool(timeout_seconds=)`` wins)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    output_schema: type[BaseModel] | dict[str, Any] | str | None = None
    """A pydantic model class or a JSON Schema dict; the final answer must be JSON matching it. A
    string names an output model registered on the worker (``module:QualName``)."""
    validators: Sequence[Validator | Callable[[Any], Any] | str] = ()
    """Checks on the final answer (``expect_validator``); a failure re-prompts the model. A string
    names a validator registered on the worker."""
    observers: Sequence[Observer] = ()
    """Called once per envelope of the task, in order, by the client that started it."""
    guards: Sequence[Guard | str] = ()
    """Consulted before every tool call, subtask and finish: allow, deny, or ask a human. A string
    names a guard registered on the worker (how tasks started over HTTP or the CLI get one)."""
    approval_timeout_seconds: float = 86400.0
    """How long an action sent for approval waits before it is denied."""
    content_channels: Sequence[ContentKindSpec] = ()
    """Kinds of context the composer places: stable ones in the cached prefix, volatile ones after
    the transcript (see noeta.context.composer)."""
    context: Mapping[str, str] = field(default_factory=dict)
    """Text for each declared content channel, by channel name."""
    max_history_events: int | None = None
    """Continue the task in a new run once a run's history has this many events (default: when
    Temporal suggests it, ~4,096 events or 4 MiB). The task id, transcript and event seq carry on."""
    resources: Sequence[ResourceSpec] | Mapping[str, Any] = ()
    """Resources the task equips: ``equip_resource(...)`` specs (created for the task, destroyed
    when it ends) or live objects by key. They stay in the worker: ``query()`` serves them from its
    in-process worker, other workers must have them in their Registry (history carries the keys)."""
    scope: Mapping[str, Any] = field(default_factory=dict)
    """Scope data the task equips (``equip_scope``): JSON, recorded in history, read by its tools,
    guards, validators, policy and sub-agents with ``expect_scope`` (nearest level wins)."""
    scope_schema: type[BaseModel] | dict[str, Any] | None = None
    """The scope the task requires (a pydantic model or JSON Schema): checked before the first
    model call, a missing or invalid key fails the task with ScopeError."""
    subagents: Sequence["SubAgent"] = ()
    """Sub-agents the model may call like tools; each call runs a child task with the sub-agent's
    own options, and its answer (or structured data) is the call's result."""
    limits: UsageLimits | None = None
    """Ceilings on tokens, calls, time and cost for the whole task (continued runs and sub-agents
    included), checked before every model and tool call; reaching one fails the task with
    BudgetExceededError (docs/budgets.md)."""
    index_interval_seconds: float | None = DEFAULT_INDEX_INTERVAL_SECONDS
    """How often a running task refreshes its turn, token and cost search attributes between status
    changes (which are always indexed at once). Each refresh is a history event and a write to the
    cluster's visibility store; None: only with status changes and at the end."""
    rate_limit_wait_seconds: float = 600.0
    """Most time one model or tool call may spend waiting on rate limits in all (a provider's 429
    and its retry-after, this worker's provider limiter, a full sync-tool pool) before it fails
    with AttemptsExhaustedError. These waits do not use up ``max_retries``."""
    model_activity: ActivityOptions = field(default_factory=ActivityOptions)
    """Timeouts, heartbeat and retry backoff of model calls; its start-to-close defaults to
    ``model_timeout_seconds``. Each kind's defaults: noeta.protocols.activity_options, docs/retries.md."""
    tool_activity: ActivityOptions = field(default_factory=ActivityOptions)
    """The same for tool calls; start-to-close defaults to ``tool_timeout_seconds``. A tool's own
    ``@tool(timeout_seconds=, heartbeat_seconds=)`` wins for that tool."""
    mcp_activity: ActivityOptions = field(default_factory=ActivityOptions)
    """The same for remote MCP servers' tools; start-to-close defaults to ``tool_timeout_seconds``."""
    guard_activity: ActivityOptions = field(default_factory=ActivityOptions)
    """The same for guard checks; start-to-close defaults to 60 s (raise it for guards that do slow I/O)."""
    validator_activity: ActivityOptions = field(default_factory=ActivityOptions)
    """The same for output validation; start-to-close defaults to ``tool_timeout_seconds``."""

    def __post_init__(self) -> None:
        # Every numeric setting against its range (noeta.protocols.bounds, shared with the workflow),
        # the activity options' included.
        problem = settings_problem(self)
        if problem is not None:
            raise ConfigurationError(problem)
        check_thinking(self.thinking)
        if self.effort is not None and self.effort not in EFFORTS:
            raise ConfigurationError(f"effort must be one of {', '.join(EFFORTS)}, got {self.effort!r}")
        if isinstance(self.allowed_tools, (str, bytes)):
            raise ConfigurationError("allowed_tools must be a list of tools or tool names, not a string")
        for item in self.allowed_tools:
            if not isinstance(item, (str, Tool)):
                raise ConfigurationError(f"allowed_tools: {item!r} is neither a tool name nor a Tool")
        self.remote_mcp_servers()  # validates them
        for alias, server in self.mcp_servers.items():
            if not is_remote(server) and not (hasattr(server, "tools") and hasattr(server, "version")):
                raise ConfigurationError(
                    f"mcp_servers[{alias!r}] must be a server from create_sdk_mcp_server or a remote "
                    "server's configuration ({'type': 'stdio' | 'http', ...})"
                )
        if self.provider is not None and not isinstance(self.provider, (str, LLMProvider)):
            raise ConfigurationError(f"provider must be a name or an LLMProvider, got {self.provider!r}")
        if self.policy is not None and not hasattr(self.policy, "decide"):
            raise ConfigurationError(f"policy {self.policy!r} has no decide(ctx, view) method")
        output_schema_spec(self.output_schema)  # validates it
        self.channel_contents()  # validates channels and context
        if self.system_prompt is not None and len(self.system_prompt.encode()) > MAX_SYSTEM_PROMPT_BYTES:
            raise PayloadTooLargeError(
                f"system_prompt is over {MAX_SYSTEM_PROMPT_BYTES} bytes; put reference material in a "
                "stable content channel or behind a tool"
            )
        if self.limits is not None and not isinstance(self.limits, UsageLimits):
            raise ConfigurationError(f"limits must be a UsageLimits, got {self.limits!r}")
        if isinstance(self.guards, (str, bytes)):
            raise ConfigurationError("guards must be a list of guards or guard names, not a string")
        guard_names: set[str] = set()
        for guard in self.guards:
            if isinstance(guard, str):
                name = _registered_name(guard, "guards")
            elif isinstance(guard, Guard):
                name = guard.name
            else:
                raise ConfigurationError(f"guards: {guard!r} is not a Guard (it needs a name and check(action, ctx))")
            if name in guard_names:
                raise ConfigurationError(f"two guards are named {name!r}")
            guard_names.add(name)
        self.resource_entries()  # validates them
        check_scope(self.scope, "Options.scope")
        output_schema_spec(self.scope_schema, "scope_schema")
        agent_names: set[str] = set()
        for agent in self.subagents:
            if not isinstance(agent, SubAgent):
                raise ConfigurationError(f"subagents: {agent!r} is not a SubAgent")
            if agent.name in agent_names or agent.name in self.tool_names():
                raise ConfigurationError(f"subagents: the name {agent.name!r} is already a tool or sub-agent")
            agent_names.add(agent.name)
        names: dict[str, Validator | str] = {}
        given: list[Validator | str] = [*self.validator_objects(), *(v for v in self.validators if isinstance(v, str))]
        for validator in given:
            name = _registered_name(validator, "validators") if isinstance(validator, str) else validator.name
            if name in names and (isinstance(validator, str) or names[name] is not validator):
                raise ConfigurationError(
                    f"two validators are named {name!r}; give one a name: expect_validator(fn, name=...)"
                )
            names[name] = validator

    def resource_entries(self) -> dict[str, Any]:
        """``resources`` by key: specs under their own key, objects under theirs."""
        items = self.resources
        if isinstance(items, Mapping):
            pairs = list(items.items())
        elif isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise ConfigurationError("resources must be a list of equip_resource(...) specs or a mapping of key -> object")
        else:
            pairs = []
            for item in items:
                if not isinstance(item, ResourceSpec):
                    raise ConfigurationError(
                        f"resources: {item!r} is not an equip_resource(...) spec; give live objects as a mapping"
                    )
                pairs.append((item.key, item))
        entries: dict[str, Any] = {}
        for key, value in pairs:
            if not isinstance(key, str) or not key:
                raise ConfigurationError(f"resources: {key!r} is not a non-empty key")
            if isinstance(value, ResourceSpec) and value.key != key:
                raise ConfigurationError(f"resources[{key!r}] is the spec of {value.key!r}")
            if key in entries:
                raise ConfigurationError(f"two resources are named {key!r}")
            entries[key] = value
        return entries

    def channel_contents(self) -> list[ChannelContent]:
        """The context texts with their channels, in declaration order."""
        declared: dict[str, ContentKindSpec] = {}
        for spec in self.content_channels:
            if not isinstance(spec, ContentKindSpec):
                raise ConfigurationError(f"content_channels: {spec!r} is not a ContentKindSpec")
            if spec.name in declared:
                raise ConfigurationError(f"two content channels are named {spec.name!r}")
            declared[spec.name] = spec
        unknown = sorted(set(self.context) - set(declared))
        if unknown:
            raise ConfigurationError(
                f"context for undeclared channel(s) {', '.join(unknown)}; declare them in content_channels"
            )
        contents = []
        for name, spec in declared.items():
            text = self.context.get(name)
            if text is None:
                continue
            if not isinstance(text, str):
                raise ConfigurationError(f"context[{name!r}] must be a string")
            if spec.max_chars is not None and len(text) > spec.max_chars:
                raise ConfigurationError(
                    f"context[{name!r}] has {len(text)} characters; channel {name!r} allows {spec.max_chars}"
                )
            contents.append(ChannelContent(name=name, text=text, stable=spec.stable))
        total = sum(len(c.text.encode()) for c in contents)
        if total > MAX_CONTEXT_BYTES:
            raise PayloadTooLargeError(
                f"context has {total} bytes in all; the limit is {MAX_CONTEXT_BYTES}. Serve large "
                "documents through a tool"
            )
        return contents

    def validator_objects(self) -> list[Validator]:
        """The validators given as objects (names refer to the worker's)."""
        if isinstance(self.validators, (str, bytes)) or not isinstance(self.validators, Sequence):
            raise ConfigurationError("validators must be a list of expect_validator(...) results or names")
        return [as_validator(v) for v in self.validators if not isinstance(v, str)]

    def validator_names(self) -> list[str]:
        return [v if isinstance(v, str) else as_validator(v).name for v in self.validators]

    def guard_objects(self) -> list[Guard]:
        """The guards given as objects (names refer to the worker's)."""
        return [g for g in self.guards if not isinstance(g, str)]

    def guard_names(self) -> list[str]:
        return [g if isinstance(g, str) else g.name for g in self.guards]

    def remote_mcp_servers(self) -> dict[str, McpServerConfig]:
        """The remote servers' configurations by alias (in-process servers left out)."""
        return {alias: parse_server(alias, raw) for alias, raw in self.mcp_servers.items() if is_remote(raw)}

    def tool_objects(self) -> list[Tool]:
        """Tool objects given directly or through in-process MCP servers."""
        tools = [t for t in self.allowed_tools if not isinstance(t, str)]
        for server in self.mcp_servers.values():
            if not is_remote(server):
                tools.extend(server.tools)
        return tools

    def tool_names(self) -> list[str]:
        names: list[str] = []
        for item in [*self.allowed_tools, *self.tool_objects()]:
            name = item if isinstance(item, str) else item.name
            if name not in names:
                names.append(name)
        return names


_AGENT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class SubAgent:
    """A sub-agent the model can call: a tool named ``name`` whose argument is a ``goal``."""

    name: str
    """The tool name the model calls (letters, digits, ``_`` and ``-``)."""
    description: str
    """What it is good for: the model's only source of truth about it."""
    options: Options = field(default_factory=Options)
    """Its own tools, system prompt, policy, output schema, scope, resources, sub-agents. Its
    provider defaults to the parent's."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _AGENT_NAME.match(self.name):
            raise ConfigurationError(f"SubAgent name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        if not isinstance(self.description, str) or not self.description.strip():
            raise ConfigurationError(f"SubAgent {self.name!r} needs a description (the model reads it)")
        if not isinstance(self.options, Options):
            raise ConfigurationError(f"SubAgent {self.name!r}: options must be Options")

    def all_options(self) -> list[Options]:
        """Its options and those of its own sub-agents, depth first."""
        found = [self.options]
        for agent in self.options.subagents:
            found.extend(agent.all_options())
        return found


def _registered_name(name: str, what: str) -> str:
    if not name.strip():
        raise ConfigurationError(f"{what}: a name must not be empty")
    return name


# Defined here before Options was split from its host settings and its workflow input.
__all__ = [
    "EFFORTS",
    "ActivityOptions",
    "MAX_GOAL_BYTES",
    "HostConfig",
    "Options",
    "SubAgent",
    "build_task_input",
    "check_goal",
    "check_thinking",
    "output_schema_spec",
    "policy_ref",
    "subagent_specs",
]
