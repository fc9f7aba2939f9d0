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
from noeta.protocols.fallback import ProviderChoice
from noeta.protocols.messages import LLMProvider, registry_name
from noeta.protocols.names import DEFAULT_PROVIDER
from noeta.protocols.policy import Policy, importable_by_path, in_process_policy, policy_path
from noeta.protocols.statuses import IF_BUSY
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


def check_if_busy(if_busy: str) -> None:
    """ConfigurationError unless ``if_busy`` is one of IF_BUSY."""
    if if_busy not in IF_BUSY:
        raise ConfigurationError(f"if_busy must be one of {', '.join(IF_BUSY)}; got {if_busy!r}")


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


@dataclasses.dataclass(frozen=True)
class Fallback:
    """A provider a task may fall back to (``Options.fallback_providers``), with the model to ask
    there. A bare name or provider object in that list means the same with the provider's default
    model."""

    provider: str | LLMProvider
    """A worker's provider by registry name (``query()`` also knows "anthropic", "openai" and
    "local"), or a provider object (``query()`` serves it; other workers need it registered under
    its ``name``)."""
    model: str | None = None
    """The model to ask there (None: the provider's default)."""


def fallback_entries(items: Any) -> list[Fallback]:
    """``Options.fallback_providers`` as Fallback entries; ConfigurationError for anything that is
    not a provider name, a provider object or a Fallback."""
    if isinstance(items, (str, bytes)) or isinstance(items, (LLMProvider, Fallback)) or not hasattr(items, "__iter__"):
        raise ConfigurationError("fallback_providers must be a list of provider names, provider objects or Fallback(...)")
    entries = []
    for item in items:
        entry = item if isinstance(item, Fallback) else Fallback(item)
        if isinstance(entry.provider, str):
            if not entry.provider.strip():
                raise ConfigurationError("fallback_providers: a provider name must not be empty")
        elif not isinstance(entry.provider, LLMProvider):
            raise ConfigurationError(
                f"fallback_providers: {entry.provider!r} is neither a provider name nor an LLMProvider"
            )
        if entry.model is not None and (not isinstance(entry.model, str) or not entry.model.strip()):
            raise ConfigurationError(f"fallback_providers: the model of {entry.provider!r} must be a non-empty string")
        entries.append(entry)
    return entries


def fallback_choices(items: Any) -> list[ProviderChoice]:
    """The fallback providers as the task's input carries them: registry names with their models."""
    return [ProviderChoice(task_provider_name(e.provider), e.model) for e in fallback_entries(items)]
