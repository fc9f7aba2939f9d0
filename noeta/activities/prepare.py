"""The bookkeeping steps of a task's life: ``prepare_task`` checks the task against this worker and
stores what every model call reuses, ``load_transcript`` hands a new run the stored transcript,
``release_resources`` destroys the task-scoped resources when the task ends.

:class:`Preparation` serves the three, from the worker's shared services and its MCP servers.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter
from temporalio import activity

from noeta.activities import mcp as remote
from noeta.activities._errors import to_application_error
from noeta.activities._services import WorkerServices, checked_spec
from noeta.context.composer import compose_system
from noeta.errors import (
    ConfigurationError,
    ContentIntegrityError,
    ContentMissingError,
    EncryptionKeyError,
    GuardNotRegisteredError,
    NoetaError,
    OutputModelNotRegisteredError,
    ProviderNotRegisteredError,
    ValidatorNotRegisteredError,
)
from noeta.providers.pricing import PRICES_VARIABLE, model_of
from noeta.protocols.activity_io import (
    LoadTranscriptInput,
    LoadTranscriptOutput,
    PrepareInput,
    PrepareOutput,
    ReleaseInput,
    ReleaseOutput,
)
from noeta.protocols.messages import Message
from noeta.protocols.names import LOAD_TRANSCRIPT, PREPARE_TASK, PREPARED_SHAPE, RELEASE_RESOURCES
from noeta.protocols.resources import RunEnv
from noeta.protocols.validation import OutputSchema
from noeta.resources.prepare import check_scope_schema, owned_resources

_MESSAGE = TypeAdapter(Message)


class Preparation:
    """``prepare_task``, ``load_transcript`` and ``release_resources``."""

    def __init__(self, services: WorkerServices, mcp: remote.McpServers) -> None:
        """``services``: the worker's shared services; ``mcp``: its connections to remote MCP servers."""
        self.services = services
        self.registry = services.registry
        self.mcp = mcp

    # -- prepare_task -----------------------------------------------------------------------

    @activity.defn(name=PREPARE_TASK)
    async def prepare_task(self, inp: PrepareInput) -> PrepareOutput:
        """Check the task against this worker (tools and their fingerprints, validators, guards,
        resources, scope, prices), list its MCP servers' tools and store what every model call reuses."""
        store, resources = self.services.store, self.services.resources
        try:
            specs = [checked_spec(self.registry, name, inp.expected_fingerprints.get(name)) for name in inp.tools]
            for name in inp.validators:
                if name not in self.registry.validators:
                    raise ValidatorNotRegisteredError(
                        f"validator {name!r} is not registered on this worker; add it to the worker's "
                        "Registry(validators=[...])"
                    )
            for name in inp.guards:
                if name not in self.registry.guards:
                    raise GuardNotRegisteredError(
                        f"guard {name!r} is not registered on this worker; add it to the worker's "
                        "Registry(guards=[...])"
                    )
            mcp_specs = await self.mcp.list_specs(inp.mcp_servers) if inp.mcp_servers else []
            owned = owned_resources(self.registry.resources, inp, {s.name: s for s in specs})
            check_scope_schema(inp.scope_schema, inp.scope, self.registry.output_models)
            missing = [name for name in inp.fallback_providers if name not in self.registry.providers]
            if missing:  # found now, not when the task's provider fails and the task needs them
                known = ", ".join(sorted(self.registry.providers)) or "none"
                raise ProviderNotRegisteredError(
                    f"fallback provider(s) {', '.join(map(repr, missing))} not registered on this worker (it has: {known})"
                )
            if inp.compactor is not None and inp.compactor not in self.registry.compactors:
                known = ", ".join(sorted(self.registry.compactors)) or "none"
                raise ConfigurationError(
                    f"compactor {inp.compactor!r} is not registered on this worker (it has: {known}); add it "
                    "with Registry.add_compactor"
                )
            if inp.priced_provider is not None:
                await self.services.io(self._check_priced, inp.priced_provider, inp.priced_model)
            schema = self._output_json_schema(inp.output_schema)
        except NoetaError as err:
            raise to_application_error(err) from err
        taken = {spec.name for spec in specs}
        mcp_specs = [spec for spec in mcp_specs if spec.name not in taken]  # a worker's own tool wins
        specs += mcp_specs
        mcp_tools_ref = store.put(remote.schemas_json(mcp_specs), "application/json") if mcp_specs else None
        if owned:
            # Created before the first model call: a resource that cannot be made fails the task now.
            env = RunEnv(owned=[r.key for r in owned], inherited=dict(inp.inherited_resources))
            try:
                await resources.ready(inp.task_id, env)
            except NoetaError as err:
                await resources.release(inp.task_id)
                raise to_application_error(err) from err
        agents_ref = (
            await self.services.io(store.put, json.dumps(inp.agents).encode(), "application/json") if inp.agents else None
        )
        system, volatile, plan = compose_system(inp.system_prompt, inp.channels)
        schema_ref = store.put(json.dumps(schema).encode(), "application/schema+json") if schema is not None else None
        return PrepareOutput(
            tools=specs,
            system_ref=store.put(system.encode()) if system else None,
            output_schema_ref=schema_ref,
            volatile_ref=store.put(volatile.encode()) if volatile else None,
            plan=plan,
            mcp_tools_ref=mcp_tools_ref,
            resources=owned,
            agents_ref=agents_ref,
            shape=PREPARED_SHAPE,
        )

    def _check_priced(self, provider_name: str, model: str | None) -> None:
        """A cost limit needs a price for the task's model: refuse the task before any token is spent."""
        provider = self.registry.providers.get(provider_name)
        if provider is None:
            return  # call_model reports the missing provider
        chosen = model_of(model, provider)
        if not self.services.prices.has_price(chosen, provider):
            raise ConfigurationError(
                f"the task has a cost limit (max_cost_usd) but model {chosen or '(none named)'!r} of provider "
                f"{provider_name!r} has no price on this worker: add it to the worker's price table "
                f"({PRICES_VARIABLE} or Registry(prices=...)), see docs/budgets.md"
            )

    def _output_json_schema(self, spec: OutputSchema | None) -> dict[str, Any] | None:
        """The JSON Schema the model is asked to follow: the task's, or (a task that only names an
        output model, e.g. started over HTTP) the registered model's."""
        if spec is None:
            return None
        if spec.json_schema or not spec.model:
            return spec.json_schema
        model = self.registry.output_models.get(spec.model)
        if model is None:
            known = ", ".join(sorted(self.registry.output_models)) or "none"
            raise OutputModelNotRegisteredError(
                f"output model {spec.model!r} is not registered on this worker (it has: {known}); add it "
                "to the worker's Registry(output_models=[...])"
            )
        return model.model_json_schema()

    # -- load_transcript ----------------------------------------------------------------------

    @activity.defn(name=LOAD_TRANSCRIPT)
    async def load_transcript(self, inp: LoadTranscriptInput) -> LoadTranscriptOutput:
        """The stored transcript for a new run; the oldest messages are left out beyond max_bytes."""
        try:
            messages = list(await self.services.io(self.services.transcripts.load, inp.head))
        except (ContentIntegrityError, ContentMissingError, EncryptionKeyError) as err:
            raise to_application_error(err) from err  # not retried: the same body would be read
        kept, size = 0, 0
        for message in reversed(messages):
            size += len(_MESSAGE.dump_json(message))
            if size > inp.max_bytes:
                break
            kept += 1
        return LoadTranscriptOutput(messages=messages[len(messages) - kept :], omitted=len(messages) - kept)

    # -- release_resources --------------------------------------------------------------------

    @activity.defn(name=RELEASE_RESOURCES)
    async def release_resources(self, inp: ReleaseInput) -> ReleaseOutput:
        """The task ended: destroy its task-scoped resources that this process created."""
        released, errors = await self.services.resources.release(inp.task_id)
        return ReleaseOutput(released=released, errors=errors)
