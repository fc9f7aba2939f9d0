"""The serializable forms of what Options holds as objects (output schemas, the policy's import
path, the provider's name) and the goal's check. The settings Options and the workflow's input
share need none: they are declared once, in noeta.protocols.task_settings."""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonschema
from pydantic import BaseModel

from noeta.builtins.llm_policy import LLMPolicy
from noeta.errors import ConfigurationError, PayloadTooLargeError
from noeta.protocols.messages import LLMProvider, registry_name
from noeta.protocols.names import DEFAULT_PROVIDER
from noeta.protocols.policy import Policy, importable_by_path, in_process_policy, policy_path
from noeta.protocols.task import MAX_GOAL_BYTES, OutputSchema, PolicyRef


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
    if not importable_by_path(cls) and in_process_policy(policy_path(cls)) is not cls:
        raise ConfigurationError(
            f"policy class {cls.__qualname__} is not importable by a worker (it is defined in "
            f"{'a function' if '<locals>' in cls.__qualname__ else 'the running script, __main__'}): "
            "define it at module level in an importable module, or run the task with query(), whose "
            "worker runs in this process and serves the script's own policy classes"
        )
    params: dict[str, Any] = {}
    if dataclasses.is_dataclass(policy):
        params = {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy) if f.init}
    return PolicyRef(path=policy_path(cls), params=params)


def check_goal(goal: str) -> None:
    """ConfigurationError for an empty goal or one that is not valid text (a lone surrogate),
    PayloadTooLargeError for one over MAX_GOAL_BYTES."""
    if not isinstance(goal, str) or not goal.strip():
        raise ConfigurationError("goal must be a non-empty string")
    try:
        goal.encode()
    except UnicodeEncodeError as err:  # a lone surrogate: no payload can carry it
        raise ConfigurationError(
            f"goal is not valid text: it holds a lone surrogate ({goal[err.start]!r}) at position {err.start}"
        ) from None
    if len(goal.encode()) > MAX_GOAL_BYTES:
        raise PayloadTooLargeError(
            f"goal is {len(goal.encode())} bytes; the limit is {MAX_GOAL_BYTES}. Put large "
            "documents behind a tool or in a content channel"
        )


def task_provider_name(provider: str | LLMProvider | None, unset: str = DEFAULT_PROVIDER) -> str:
    """The provider name a task's input carries: a name as given, a provider object's registry name
    (the key a worker's Registry holds it under), ``unset`` for None: the worker's default provider,
    or "" in a sub-agent's input (it inherits its parent's)."""
    if provider is None:
        return unset
    return provider if isinstance(provider, str) else registry_name(provider)
