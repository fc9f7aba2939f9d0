"""``query()``: run one goal to its end on the embedded default (or TEMPORAL_ADDRESS).

The task runs as a durable workflow on an in-process worker that serves this call's tools,
provider objects and resources on a task queue of its own, so objects living in this process never
reach another process's worker.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from noeta.builtins.memory.tool import add_memory
from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.messages import ViewItem, as_messages
from noeta.client.options import HostConfig, Options
from noeta.client.runtime import blocking_twin
from noeta.client.task_input import fallback_choices, fallback_entries, task_provider_name
from noeta.context.content_store import ContentStore
from noeta.errors import ConfigurationError, ProviderNotRegisteredError
from noeta.evals.online import install_online_scoring
from noeta.protocols.budget import CallCounts
from noeta.protocols.fallback import ProviderUsage
from noeta.protocols.event_log import EventEnvelope
from noeta.protocols.messages import ImageBlock, LLMProvider, Usage
from noeta.protocols.policy import importable_by_path, serve_in_process
from noeta.protocols.statuses import GoalStatus, ended_as
from noeta.resources.context import ambient_resources
from noeta.worker import Registry, build_worker


@dataclass(frozen=True)
class QueryResult:
    task_id: str
    status: GoalStatus
    """"completed" or "failed" (then ``answer()`` is the reason)."""
    usage: Usage
    """Tokens and cost (``usage.cost_usd``) of the whole task, sub-agents included."""
    turns: int
    events: list[EventEnvelope] = field(repr=False)
    content_store: ContentStore = field(repr=False)
    data: Any = None
    """The validated structured output: an instance of ``Options.output_schema`` when that is a
    pydantic model, the JSON value when it is a JSON Schema dict, else None."""
    _answer: str = field(repr=False, default="")
    counts: CallCounts = field(default_factory=CallCounts)
    """Model and tool calls of the whole task, sub-agents included."""
    usage_by_provider: list[ProviderUsage] = field(default_factory=list)
    """With ``fallback_providers``: the task's own model calls' usage and cost by provider and model."""

    @property
    def cost_usd(self) -> float:
        """What the task cost in US dollars (0 when its model has no price; docs/budgets.md)."""
        return self.usage.cost_usd

    def answer(self) -> str:
        return self._answer

    def messages(self) -> list[ViewItem]:
        return as_messages(self.events, self.content_store)


def registry_for(options: Options, store: ContentStore, resources: Mapping[str, Any] | None = None) -> Registry:
    """A registry serving what ``options`` and its sub-agents carry: tools, validators, guards,
    output and scope models, resources and provider objects; plus the run's ``resources``."""
    registry = Registry.of(content_store=store, resources=resources)
    add_carried(registry, options)
    return registry


def add_carried(registry: Registry, options: Options) -> None:
    """Add to ``registry`` what ``options`` and its sub-agents carry: tools, validators, guards,
    output and scope models, resources, and the provider objects of sub-agents and fallbacks (under
    the names their inputs carry); ConfigurationError for another object of a registered name."""
    for opts in [options, *(o for agent in options.subagents for o in agent.all_options())]:
        for tool in opts.tool_objects():
            registry.add_tool(tool)
        for validator in opts.validator_objects():
            registry.add_validator(validator)
        for guard in opts.guard_objects():
            registry.add_guard(guard)
        for model in (opts.output_schema, opts.scope_schema):
            if isinstance(model, type):
                registry.add_output_model(model)
        for key, resource in opts.resource_entries().items():
            registry.add_resource(resource, key=key)
        if opts is not options and isinstance(opts.provider, LLMProvider):
            # under the name its sub-agent's input carries
            registry.add_provider(opts.provider, name=task_provider_name(opts.provider))
        for entry in fallback_entries(opts.fallback_providers):
            if isinstance(entry.provider, LLMProvider):  # under the name the task's input carries
                registry.add_provider(entry.provider, name=task_provider_name(entry.provider))


def serve_script_policies(options: Options) -> None:
    """Serve the policy classes of the running script (which a worker elsewhere could not import)
    to this process's workflows: query()'s worker runs here, as it does for the script's tools."""
    for opts in [options, *(o for agent in options.subagents for o in agent.all_options())]:
        if opts.policy is not None and not importable_by_path(type(opts.policy)):
            try:
                serve_in_process(type(opts.policy))
            except ValueError as err:
                raise ConfigurationError(str(err)) from None


def _registry_for(
    options: Options, provider: LLMProvider | str | None, store: ContentStore, settings: Settings,
    resources: Mapping[str, Any],
) -> tuple[Registry, str]:
    registry = registry_for(options, store, resources)
    if "memory" in options.tool_names():  # the task opts in to the built-in memory tool by name
        add_memory(registry, settings.memory_store())
    chosen = provider if provider is not None else options.provider
    if not isinstance(chosen, LLMProvider):
        from noeta.providers.defaults import default_provider

        chosen = default_provider(chosen)  # a built-in provider's name, or None: the environment's
    name = registry.add_provider(chosen, name=task_provider_name(chosen))
    add_fallback_providers(registry, options)
    return registry, name


def add_fallback_providers(registry: Registry, options: Options) -> None:
    """Register the built-in providers that ``options`` (and its sub-agents) name as fallbacks;
    ProviderNotRegisteredError, before the task starts, for a name this process cannot serve."""
    from noeta.providers.defaults import KNOWN_PROVIDERS, default_provider

    for opts in [options, *(o for agent in options.subagents for o in agent.all_options())]:
        for choice in fallback_choices(opts.fallback_providers):
            if choice.provider in registry.providers:
                continue
            if choice.provider.strip().lower() not in KNOWN_PROVIDERS:
                known = ", ".join(sorted(registry.providers)) or "none"
                raise ProviderNotRegisteredError(
                    f"fallback provider {choice.provider!r} is neither given as an object nor one of "
                    f"{', '.join(KNOWN_PROVIDERS)} (this run's providers: {known})"
                )
            registry.add_provider(default_provider(choice.provider), name=choice.provider)


async def aquery(
    options: Options | None = None,
    *,
    goal: str,
    provider: LLMProvider | str | None = None,
    workspace_dir: str | Path | None = None,
    images: Sequence[ImageBlock] = (),
    host: HostConfig | None = None,
    task_id: str | None = None,
    resources: Mapping[str, Any] | None = None,
) -> QueryResult:
    """Async twin of :func:`query`."""
    if not isinstance(options, (Options, type(None))):
        raise ConfigurationError(f"query() takes Options as its first argument, got {options!r}")
    options = options or Options()
    host = host or HostConfig()
    store = host.store()
    # Nearest wins: this call's resources, then the enclosing run_with blocks', then the host's.
    run_resources = {**host.resources, **ambient_resources(), **(resources or {})}
    serve_script_policies(options)
    registry, provider_name = _registry_for(options, provider, store, host.settings, run_resources)
    install_online_scoring(registry, options.scoring)
    # The in-process worker hands deltas to the sink itself (all of them before the result returns);
    # the client does not subscribe to the broker as well.
    registry.delta_sink = host.delta_sink
    registry.prices = host.prices
    client = await AsyncClient.connect(dataclasses.replace(host, content_store=store, delta_sink=None))
    task_queue = f"noeta-query-{uuid.uuid4().hex[:12]}"
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start(
            goal,
            options,
            task_id=task_id,
            images=images,
            workspace_dir=workspace_dir,
            provider_name=provider_name,
            task_queue=task_queue,
        )
        try:
            result = await client.result(task_id)
        finally:
            await client.observed(task_id)
        events = await client.events(task_id)
    return QueryResult(
        task_id=task_id,
        status=ended_as(result.status),
        usage=result.usage,
        turns=result.turns,
        events=events,
        content_store=store,
        data=structured_data(options, result.data),
        _answer=result.answer,
        counts=result.counts,
        usage_by_provider=list(result.usage_by_provider),
    )


def structured_data(options: Options, data: Any) -> Any:
    """Task result data as the caller's model instance when ``output_schema`` is a model class."""
    schema = options.output_schema
    if data is None or not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return data
    return schema.model_validate(data)


query = blocking_twin(aquery, """Run ``goal`` to its end and return the result. Blocks; use
    :func:`aquery` in async code.

    ``provider``: an LLMProvider object, or the name of a built-in one ("anthropic", "openai",
    "local"); None: ``options.provider``, else the environment's default. ``resources``: live
    objects by key for this run (with those of enclosing ``run_with`` blocks and
    ``HostConfig.resources``); they stay in this process's in-process worker.""")
