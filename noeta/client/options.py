"""Options: everything a task is configured with, and where each extension mounts; and the
workflow's input built from them (``build_task_input``).

Validated when constructed, so bad input fails before any token is spent. The settings that reach
the workflow as they are (model, max_turns, limits, the activity options...) are declared once, in
noeta.protocols.task_settings; the fields here are the objects that need a serializable form first.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from noeta.client.host import HostConfig
from noeta.client.task_input import (
    Fallback, check_goal, fallback_choices, fallback_entries, output_schema_spec, policy_ref, task_provider_name,
)
from noeta.context.content_channel import ContentKindSpec
from noeta.errors import ConfigurationError, PayloadTooLargeError
from noeta.mcp.config import allowed_at_start, is_remote, parse_server
from noeta.protocols.activity_options import ActivityOptions
from noeta.protocols.bounds import settings_problem
from noeta.protocols.budget import UsageLimits
from noeta.protocols.channels import ChannelContent
from noeta.protocols.event_log import Observer
from noeta.protocols.hooks import Guard
from noeta.protocols.mcp import McpServerConfig
from noeta.protocols.messages import ImageBlock, LLMProvider
from noeta.protocols.policy import Policy
from noeta.protocols.resources import ResourceSpec
from noeta.protocols.scope import ScopeLevel, check_scope
from noeta.protocols.scoring import OnlineScoring
from noeta.protocols.task import (
    MAX_CONTEXT_BYTES,
    MAX_GOAL_BYTES,
    MAX_SYSTEM_PROMPT_BYTES,
    SubAgentSpec,
    TaskInput,
)
from noeta.protocols.task_settings import EFFORTS, MODEL_TIMEOUT_SECONDS, TaskSettings, check_thinking, settings_values
from noeta.protocols.tool import Tool, tool_fingerprint
from noeta.protocols.validation import Validator, as_validator

# Keyword-only, like the TaskSettings fields it inherits (model, max_turns, limits, the activity
# options...: declared once there, shared with the workflow's input).
@dataclass(frozen=True, kw_only=True)
class Options(TaskSettings):
    """How a task runs: the TaskSettings (noeta.protocols.task_settings) and where each extension
    mounts. Every field has a working default."""

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
    policy: Policy | None = None
    """A custom Policy (an importable class); default: the LLM policy."""
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
    content_channels: Sequence[ContentKindSpec] = ()
    """Kinds of context the composer places: stable ones in the cached prefix, volatile ones after
    the transcript (see noeta.context.composer)."""
    context: Mapping[str, str] = field(default_factory=dict)
    """Text for each declared content channel, by channel name."""
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
    fallback_providers: Sequence[str | LLMProvider | Fallback] = ()
    """Providers to move to, in order, when a model call fails on the current one in a way another may
    not share (attempts run out, 401/403/404, a request too long for its window after compaction).
    Names, provider objects or ``Fallback(provider, model)``; the task stays on the new one
    (docs/long-running.md)."""
    scoring: OnlineScoring | None = None
    """Score a sample of these tasks as they end, recorded as TaskScored (docs/evaluating.md)."""

    def __post_init__(self) -> None:
        """Check the settings (numeric ranges, thinking, effort, tools, MCP servers...); ConfigurationError
        for one that is wrong. Warns when the deprecated model_timeout_seconds is set."""
        # Every numeric setting against its range (noeta.protocols.bounds, shared with the workflow),
        # the activity options' included.
        problem = settings_problem(self)
        if problem is not None:
            raise ConfigurationError(problem)
        if self.model_timeout_seconds != MODEL_TIMEOUT_SECONDS:
            warnings.warn(
                "Options.model_timeout_seconds is deprecated: set "
                "model_activity=ActivityOptions(start_to_close_seconds=...) (the value is still used "
                "when model_activity sets no start-to-close timeout)",
                DeprecationWarning,
                stacklevel=3,  # the caller of Options(...), past the generated __init__
            )
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
        fallback_entries(self.fallback_providers)  # validates them
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
        """The registry names of every validator, given by name or as an object."""
        return [v if isinstance(v, str) else as_validator(v).name for v in self.validators]

    def guard_objects(self) -> list[Guard]:
        """The guards given as objects (names refer to the worker's)."""
        return [g for g in self.guards if not isinstance(g, str)]

    def guard_names(self) -> list[str]:
        """The registry names of every guard, given by name or as an object."""
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
        """The names of every tool the task may use (named, given as objects, or served by in-process MCP
        servers), each once, in order."""
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
        """ConfigurationError unless the name is a valid tool name, the description is not blank and the
        options are Options."""
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


def build_task_input(
    options: Options,
    goal: str,
    *,
    provider_name: str,
    keep_open: bool = False,
    images: Sequence[ImageBlock] = (),
    workspace_dir: str | Path | None = None,
    trace_id: str | None = None,
    task_id: str = "",
    subagent_template: bool = False,
) -> TaskInput:
    """Validate a goal and turn Options into the workflow's input: the TaskSettings as they are,
    the other fields in their serializable forms. ``subagent_template``: the input of a declared
    sub-agent, whose goal (empty here) comes with each call."""
    if not subagent_template:
        check_goal(goal)
    settings = settings_values(options)
    limits = options.limits
    settings["limits"] = limits if limits is not None and not limits.empty else None  # no limits: none recorded
    return TaskInput(
        **settings,
        goal=goal,
        provider=provider_name,
        images=list(images),
        tools=options.tool_names(),
        tool_fingerprints={t.name: tool_fingerprint(t.name, t.version, t.input_schema) for t in options.tool_objects()},
        policy=policy_ref(options.policy),
        keep_open=keep_open,
        trace_id=trace_id,
        workspace_dir=str(Path(workspace_dir).resolve()) if workspace_dir is not None else None,
        output_schema=output_schema_spec(options.output_schema),
        validators=options.validator_names(),
        guards=options.guard_names(),
        channels=options.channel_contents(),
        mcp_servers=allowed_at_start(options.remote_mcp_servers()),
        resources=list(options.resource_entries()),
        scope=[ScopeLevel(task_id, check_scope(options.scope))] if options.scope else [],
        scope_schema=output_schema_spec(options.scope_schema, "scope_schema"),
        subagents=subagent_specs(options),
        fallback_providers=fallback_choices(options.fallback_providers),
        scoring=options.scoring.plan() if options.scoring is not None else None,
    )


def subagent_specs(options: Options) -> list[SubAgentSpec]:
    """The declared sub-agents as the workflow's input (their goal comes with each call; a
    sub-agent without a provider of its own inherits its parent's)."""
    return [
        SubAgentSpec(
            agent.name,
            agent.description,
            build_task_input(
                agent.options, "", provider_name=task_provider_name(agent.options.provider, unset=""),
                subagent_template=True,
            ),
        )
        for agent in options.subagents
    ]


def _registered_name(name: str, what: str) -> str:
    if not name.strip():
        raise ConfigurationError(f"{what}: a name must not be empty")
    return name


# Defined here before Options was split from its host settings and its workflow input.
__all__ = [
    "EFFORTS",
    "ActivityOptions",
    "Fallback",
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
