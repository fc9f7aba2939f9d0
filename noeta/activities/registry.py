"""The registry: what a worker can run (tools, providers, resources, guards, validators, output
models) and where its tasks' content lives.

It sits in the activities layer because the activities are what serve it: they receive a registry,
while :mod:`noeta.worker` builds a Temporal worker from one (and re-exports :class:`Registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from noeta.context.content_store import ContentStore
from noeta.context.step_records import StepRecords
from noeta.errors import ConfigurationError
from noeta.providers.pricing import PriceTable
from noeta.protocols.hooks import Guard
from noeta.protocols.local_tools import check_local_tool
from noeta.protocols.messages import LLMProvider, Message, StreamDelta, registry_name
from noeta.protocols.resources import ResourceSpec
from noeta.protocols.scoring import TaskScorer
from noeta.protocols.tool import Tool, ToolSpec, tool_fingerprint
from noeta.protocols.validation import Validator, as_validator
from noeta.providers.limits import ProviderLimit

T = TypeVar("T")


def _add_once(table: dict[str, T], name: str, item: T, kind: str) -> None:
    # Registering the same object again is harmless; a second object under its name is a mistake.
    if name in table and table[name] is not item:
        raise ConfigurationError(f"two different {kind} are named {name!r}")
    table[name] = item


@dataclass
class Registry:
    """What a worker can run. Tools are keyed by name, providers by registry name."""

    tools: dict[str, Tool] = field(default_factory=dict)
    providers: dict[str, LLMProvider] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    """The process-wide default resources: live objects, or ``equip_resource`` specs (see
    :mod:`noeta.protocols.resources`). A task's own and its parents' exposed resources come first."""
    content_store: ContentStore | None = None
    validators: dict[str, Validator] = field(default_factory=dict)
    guards: dict[str, Guard] = field(default_factory=dict)
    output_models: dict[str, type[BaseModel]] = field(default_factory=dict)
    """Pydantic models by ``module:QualName``; an output schema naming one is validated with it."""
    delta_sink: Callable[[StreamDelta], Any] | None = None
    """Receives streamed pieces of model responses in the worker's process (as they arrive)."""
    delta_broker: Any = None
    """A broker the worker also publishes them to (:mod:`noeta.deltas`; None: ``NOETA_DELTA_BROKER``,
    else the in-process broker); clients elsewhere read the tasks' workflow streams."""
    mcp_commands: Collection[str] | None = None
    """The commands of stdio MCP servers that tasks may have this worker start (None: any; ``noeta
    worker`` takes them from ``NOETA_MCP_COMMANDS``)."""
    mcp_connections: Any = field(default=None, repr=False, compare=False)
    """The worker's live MCP connections (:class:`noeta.mcp.connections.McpConnections`), opened
    on first use and closed when the worker stops."""
    prices: PriceTable | None = None
    """How model calls are priced (None: ``NOETA_PRICES`` over the genai-prices catalogue)."""
    provider_limits: dict[str, ProviderLimit] = field(default_factory=dict)
    """The rate / concurrency limit per provider name (see noeta.providers.limits)."""
    rate_limits: Any = None
    """Where the limits and the pauses providers ask for are counted: a
    :class:`noeta.providers.rate_windows.RateWindows` or a ``redis://`` / ``postgresql://`` URL
    shared by the fleet's workers (None: ``NOETA_RATE_LIMITS``, else this worker alone)."""
    compactors: dict[str, Callable[[list[Message]], list[Message]]] = field(default_factory=dict)
    """Pure functions over the messages a model sees, by name, for ``Compaction(strategy="function",
    function=name)`` (docs/long-running.md)."""
    step_records: StepRecords | None = None
    """Where finished steps are recorded (default: beside the content store; see
    noeta.context.step_records)."""
    task_scorer: TaskScorer | None = None
    """Scores tasks with online scoring as they end (``Options.scoring``; docs/evaluating.md)."""
    _specs: dict[str, tuple[Tool, ToolSpec]] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        tools: Iterable[Tool] = (),
        providers: Iterable[LLMProvider] | Mapping[str, LLMProvider] = (),
        resources: Mapping[str, Any] | Iterable[ResourceSpec] | None = None,
        content_store: ContentStore | None = None,
        validators: Iterable[Validator | Callable[[Any], Any]] = (),
        output_models: Iterable[type[BaseModel]] = (),
        guards: Iterable[Guard] = (),
        provider_limits: Mapping[str, ProviderLimit] | None = None,
    ) -> Registry:
        """A registry with all of these added (each through its ``add_`` method, so the same checks
        apply); providers given as a mapping are registered under its keys."""
        registry = cls(content_store=content_store, provider_limits=dict(provider_limits or {}))
        entries = resources.items() if isinstance(resources, Mapping) else ((None, r) for r in resources or ())
        for key, resource in entries:
            registry.add_resource(resource, key=key)
        for tool in tools:
            registry.add_tool(tool)
        for validator in validators:
            registry.add_validator(validator)
        for model in output_models:
            registry.add_output_model(model)
        for guard in guards:
            registry.add_guard(guard)
        items = providers.items() if isinstance(providers, Mapping) else ((None, p) for p in providers)
        for name, provider in items:
            registry.add_provider(provider, name=name)
        return registry

    def store(self) -> ContentStore:
        """The content store, which a worker cannot run without (clients read what it writes).
        Raises ConfigurationError when the registry has none."""
        if self.content_store is None:
            raise ConfigurationError("the registry has no content_store; client and worker must share one")
        return self.content_store

    def add_tool(self, tool: Tool) -> None:
        """Register ``tool`` under its name; ConfigurationError for a non-Tool or another tool of the
        same name."""
        if not isinstance(tool, Tool):
            raise ConfigurationError(f"{tool!r} is not a Tool (decorate it with @tool)")
        if getattr(tool, "local", False) is True:  # a class-based tool's options, checked as @tool checks them
            check_local_tool(tool.name, getattr(tool, "timeout_seconds", None), getattr(tool, "heartbeat_seconds", None))
        _add_once(self.tools, tool.name, tool, "tools")

    def add_provider(self, provider: LLMProvider, name: str | None = None, limit: ProviderLimit | None = None) -> str:
        """Register ``provider`` under ``name`` (default: its registry name), with this worker's
        ``limit`` for it if given; returns the name. ConfigurationError for a non-provider."""
        if not isinstance(provider, LLMProvider):
            raise ConfigurationError(f"{provider!r} is not an LLMProvider (it needs complete())")
        key = name or registry_name(provider)
        self.providers[key] = provider
        if limit is not None:
            self.provider_limits[key] = limit
        return key

    def add_resource(self, resource: Any, key: str | None = None) -> str:
        """A live object under ``key``, or an ``equip_resource`` spec (under its own key)."""
        if isinstance(resource, ResourceSpec):
            if key is not None and key != resource.key:
                raise ConfigurationError(f"resource {key!r} is given the spec of {resource.key!r}")
            key = resource.key
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"resource {resource!r} needs a non-empty key (or use equip_resource)")
        _add_once(self.resources, key, resource, "resources")
        return key

    def add_validator(self, validator: Validator | Callable[[Any], Any]) -> str:
        """Register ``validator`` (a bare function under its default name); returns the name.
        ConfigurationError for another validator of the same name."""
        item = as_validator(validator)
        existing = self.validators.get(item.name)
        if existing is not None and existing.fn is not item.fn:
            raise ConfigurationError(f"two different validators are named {item.name!r}")
        self.validators[item.name] = item
        return item.name

    def add_guard(self, guard: Guard) -> str:
        """Register ``guard`` under its name and return the name; ConfigurationError for a non-Guard or
        another guard of the same name."""
        if not isinstance(guard, Guard):
            raise ConfigurationError(f"{guard!r} is not a Guard (it needs a name and check(action, ctx))")
        _add_once(self.guards, guard.name, guard, "guards")
        return guard.name

    def add_compactor(self, fn: Callable[[list[Message]], list[Message]], name: str | None = None) -> str:
        """Register a compactor (a pure function from the messages the model sees to the shorter
        list it should see instead) under ``name`` (default: the function's ``__name__``); returns
        the name. ConfigurationError for a non-callable or another compactor of the same name."""
        if not callable(fn):
            raise ConfigurationError(f"compactor {fn!r} is not callable")
        key = name or getattr(fn, "__name__", "")
        if not key:
            raise ConfigurationError(f"compactor {fn!r} needs a name")
        _add_once(self.compactors, key, fn, "compactors")
        return key

    def add_output_model(self, model: type[BaseModel]) -> str:
        """Register a pydantic output model under ``module:QualName`` and return that key."""
        key = f"{model.__module__}:{model.__qualname__}"
        self.output_models[key] = model
        return key

    def tool_spec(self, name: str) -> ToolSpec:
        """The tool's spec and identity fingerprint, computed once per tool object (they are asked
        for on every model and tool call)."""
        tool = self.tools[name]
        cached = self._specs.get(name)
        if cached is not None and cached[0] is tool:
            return cached[1]
        spec = ToolSpec(
            name=tool.name,
            version=tool.version,
            description=tool.description,
            input_schema=tool.input_schema,
            risk_level=tool.risk_level,
            fingerprint=tool_fingerprint(tool.name, tool.version, tool.input_schema),
            start_to_close_seconds=getattr(tool, "timeout_seconds", None),
            heartbeat_seconds=getattr(tool, "heartbeat_seconds", None),
            max_retries=getattr(tool, "max_retries", None),
            resources=list(getattr(tool, "resources", ()) or ()),
            local=getattr(tool, "local", False) is True,
        )
        self._specs[name] = (tool, spec)
        return spec


__all__ = ["Registry"]
