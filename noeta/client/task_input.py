"""Options as the workflow's input: the goal checked, every setting in its serializable form
(output schemas, the policy's import path, sub-agents' inputs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
from pydantic import BaseModel

from noeta.builtins.llm_policy import LLMPolicy
from noeta.errors import ConfigurationError, PayloadTooLargeError
from noeta.protocols.messages import ImageBlock, registry_name
from noeta.protocols.policy import Policy
from noeta.protocols.scope import ScopeLevel, check_scope
from noeta.protocols.task import (
    MAX_GOAL_BYTES,
    OutputSchema,
    PolicyRef,
    SubAgentSpec,
    TaskInput,
)
from noeta.protocols.tool import tool_fingerprint

if TYPE_CHECKING:
    from noeta.client.options import Options


def output_schema_spec(
    schema: type[BaseModel] | dict[str, Any] | str | None, field_name: str = "output_schema"
) -> OutputSchema | None:
    """The serializable form of ``Options.output_schema`` (or ``scope_schema``); a name leaves the
    schema to the worker's registered model (prepare_task fills it in)."""
    if schema is None:
        return None
    if isinstance(schema, str):
        if ":" not in schema:
            raise ConfigurationError(
                f"{field_name} {schema!r} must name a registered output model as 'module:QualName'"
            )
        return OutputSchema(json_schema={}, model=schema)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return OutputSchema(json_schema=schema.model_json_schema(), model=f"{schema.__module__}:{schema.__qualname__}")
    if isinstance(schema, dict):
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.exceptions.SchemaError as err:
            raise ConfigurationError(f"{field_name} is not valid JSON Schema: {err.message}") from err
        return OutputSchema(json_schema=schema)
    raise ConfigurationError(f"{field_name} must be a pydantic model class or a JSON Schema dict, got {schema!r}")


def policy_ref(policy: Policy | None) -> PolicyRef | None:
    """The import path of a policy, for loading it inside the workflow."""
    if policy is None or type(policy) is LLMPolicy:
        return None
    cls = type(policy)
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        raise ConfigurationError(
            f"policy class {cls.__qualname__} must be defined at module level in an importable "
            "module (not __main__ or a function): the workflow loads it by import path"
        )
    params: dict[str, Any] = {}
    if dataclasses.is_dataclass(policy):
        params = {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy) if f.init}
    return PolicyRef(path=f"{cls.__module__}:{cls.__qualname__}", params=params)


def check_goal(goal: str) -> None:
    if not isinstance(goal, str) or not goal.strip():
        raise ConfigurationError("goal must be a non-empty string")
    if len(goal.encode()) > MAX_GOAL_BYTES:
        raise PayloadTooLargeError(
            f"goal is {len(goal.encode())} bytes; the limit is {MAX_GOAL_BYTES}. Put large "
            "documents behind a tool or in a content channel"
        )


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
    """Validate a goal and turn Options into the workflow's input. ``subagent_template``: the input
    of a declared sub-agent, whose goal (empty here) comes with each call."""
    if not subagent_template:
        check_goal(goal)
    fingerprints = {t.name: tool_fingerprint(t.name, t.version, t.input_schema) for t in options.tool_objects()}
    return TaskInput(
        goal=goal,
        provider=provider_name,
        model=options.model,
        system_prompt=options.system_prompt,
        images=list(images),
        tools=options.tool_names(),
        tool_fingerprints=fingerprints,
        max_turns=options.max_turns,
        max_retries=options.max_retries,
        policy=policy_ref(options.policy),
        keep_open=keep_open,
        trace_id=trace_id,
        temperature=options.temperature,
        max_tokens=options.max_tokens,
        model_timeout_seconds=options.model_timeout_seconds,
        tool_timeout_seconds=options.tool_timeout_seconds,
        workspace_dir=str(Path(workspace_dir).resolve()) if workspace_dir is not None else None,
        metadata=dict(options.metadata),
        output_schema=output_schema_spec(options.output_schema),
        validators=options.validator_names(),
        guards=options.guard_names(),
        approval_timeout_seconds=options.approval_timeout_seconds,
        max_history_events=options.max_history_events,
        channels=options.channel_contents(),
        validate_tool_input=options.validate_tool_input,
        thinking=dict(options.thinking) if options.thinking is not None else None,
        effort=options.effort,
        provider_retries=options.provider_retries,
        tool_retries=options.tool_retries,
        mcp_servers=options.remote_mcp_servers(),
        resources=list(options.resource_entries()),
        scope=[ScopeLevel(task_id, check_scope(options.scope))] if options.scope else [],
        scope_schema=output_schema_spec(options.scope_schema, "scope_schema"),
        subagents=subagent_specs(options),
        limits=options.limits if options.limits is not None and not options.limits.empty else None,
        rate_limit_wait_seconds=options.rate_limit_wait_seconds,
        index_interval_seconds=options.index_interval_seconds,
        model_activity=options.model_activity,
        tool_activity=options.tool_activity,
        mcp_activity=options.mcp_activity,
        guard_activity=options.guard_activity,
        validator_activity=options.validator_activity,
    )


def subagent_specs(options: Options) -> list[SubAgentSpec]:
    """The declared sub-agents as the workflow's input (their goal comes with each call)."""
    specs = []
    for agent in options.subagents:
        provider = agent.options.provider
        name = "" if provider is None else provider if isinstance(provider, str) else registry_name(provider)
        template = build_task_input(agent.options, "", provider_name=name, subagent_template=True)
        specs.append(SubAgentSpec(agent.name, agent.description, template))
    return specs
