"""The worker's activities: the I/O side of AgentWorkflow.

``prepare_task`` records the task's tools (with their identity fingerprints) and stores the system
prompt; ``call_model`` rebuilds the transcript from the content store, calls the provider and
stores the extended transcript; ``invoke_tool`` runs one tool call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import json
import logging
import os
import re
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import jsonschema
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python
from temporalio import activity

from noeta.activities import mcp as remote
from noeta.activities._attempts import AttemptLedger, as_details
from noeta.activities._errors import to_application_error
from noeta.activities._heartbeat import AttemptTimedOut, attempt_seconds, with_heartbeat
from noeta.activities._threads import ThreadPool
from noeta.builtins.memory.tool import RecallResult, memory_tool
from noeta.client.config import DELTA_BROKER_VARIABLE
from noeta.context.composer import compose_messages, compose_system
from noeta.context.content_store import ContentStore
from noeta.context.step_records import step_records_for
from noeta.context.transcript import TranscriptStore
from noeta.deltas import broker_for
from noeta.errors import (
    ConfigurationError,
    GuardNotRegisteredError,
    NoetaError,
    OutputModelNotRegisteredError,
    ProviderError,
    ProviderNotRegisteredError,
    ResourceNotFoundError,
    ScopeError,
    ToolIdentityMismatchError,
    ToolNotRegisteredError,
    ToolRetryableError,
    ToolTimeoutError,
    ValidatorNotRegisteredError,
    WorkerBusyError,
)
from noeta.pricing import PRICES_VARIABLE, PriceTable, model_of
from noeta.protocols.hooks import GuardContext, GuardDecision, VerdictResult, combine
from noeta.protocols.messages import (
    ContentRef,
    LLMRequest,
    LLMResponse,
    Message,
    StreamDelta,
    StreamingProvider,
    TextBlock,
)
from noeta.protocols.names import (
    CALL_MODEL,
    CHECK_GUARDS,
    INVOKE_TOOL,
    LOAD_TRANSCRIPT,
    PREPARE_TASK,
    RELEASE_RESOURCES,
    VALIDATE_OUTPUT,
)
from noeta.protocols.resources import RunEnv
from noeta.protocols.scope import deep_freeze
from noeta.protocols.task import (
    CallModelInput,
    CallModelOutput,
    CheckGuardsInput,
    CheckGuardsOutput,
    InvokeToolInput,
    InvokeToolOutput,
    LoadTranscriptInput,
    LoadTranscriptOutput,
    OutputSchema,
    PrepareInput,
    PrepareOutput,
    ReleaseInput,
    ReleaseOutput,
    ValidateInput,
    ValidateOutput,
)
from noeta.protocols.tool import Tool, ToolContext, ToolResult, ToolSpec
from noeta.protocols.validation import DEFAULT_FAILURE_MESSAGE
from noeta.providers.errors import classify_exception
from noeta.providers.limits import MAX_QUEUE_SECONDS, Limiter
from noeta.resources.context import ActiveRun, CallRecorder, activated
from noeta.resources.pool import ResourcePool
from noeta.resources.prepare import check_scope_schema, owned_resources
from noeta.telemetry import instrument
from noeta.tuning import WorkerTuning

if TYPE_CHECKING:
    from noeta.worker import Registry

_MESSAGE = TypeAdapter(Message)
_MODEL_OUTPUT = TypeAdapter(CallModelOutput)
_TOOL_OUTPUT = TypeAdapter(InvokeToolOutput)
logger = logging.getLogger(__name__)

#: Tool outputs larger than this go to the content store; history keeps a reference and a preview.
INLINE_OUTPUT_LIMIT = 4096
PREVIEW_CHARS = 512
#: A model answer's text block larger than this goes to the content store like a large tool output
#: (Temporal refuses payloads over 2 MiB; the transcript keeps the whole text).
INLINE_ANSWER_LIMIT = 256 * 1024
#: Longest a synchronous tool, guard or validator waits for a free thread before its attempt is
#: handed back to Temporal as a wait (WorkerBusyError).
THREAD_WAIT_SECONDS = 10.0


async def call_maybe_async(fn: Any, *args: Any, pool: ThreadPool, label: str = "", wait_seconds: float | None = None) -> Any:
    """Call a sync or async callable; sync ones run on ``pool``'s threads so heartbeats keep flowing."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await pool.run(fn, *args, label=label, wait_seconds=wait_seconds)
    if inspect.isawaitable(result):
        return await result
    return result


def tool_callable(tool: Tool) -> Any:
    """What to call for ``tool``: an ``@tool`` around an async function is awaited on the event loop;
    its sync ``invoke`` wrapper would cost a thread that a hung synchronous tool may be holding."""
    fn = getattr(tool, "fn", None)
    return fn if inspect.iscoroutinefunction(fn) else tool.invoke


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """The provider-neutral tool shape put in ``LLMRequest.tools``."""
    return {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}


class AgentActivities:
    def __init__(self, registry: "Registry", tuning: WorkerTuning | None = None) -> None:
        tuning = tuning or WorkerTuning()
        self.registry = registry
        if registry.content_store is None:  # build_worker refuses such a registry first
            raise ConfigurationError("the registry has no content_store; client and worker must share one")
        self.store: ContentStore = registry.content_store
        self.transcripts = TranscriptStore(self.store)
        # Two pools: a hung synchronous tool holds a user-code thread, never one that content-store
        # reads and writes (every model call's) need.
        self.io_pool = ThreadPool(tuning.io_threads, "io", "NOETA_IO_THREADS")
        self.user_code_pool = ThreadPool(tuning.sync_tool_threads, "sync-tool", "NOETA_SYNC_TOOL_THREADS")
        self.step_records = registry.step_records or step_records_for(self.store)
        self.limiters = {name: Limiter(name, limit) for name, limit in registry.provider_limits.items()}
        self._validators: dict[str, tuple[Tool, Any]] = {}
        self._mcp_schemas: dict[str, dict[str, dict[str, Any]]] = {}  # by content hash
        self.delta_broker = registry.delta_broker or broker_for(os.environ.get(DELTA_BROKER_VARIABLE))
        self.pool = ResourcePool(registry.resources)
        """Live resources created from the registry's equip_resource specs (per task, per worker)."""
        self._env_prices: PriceTable | None = None

    @property
    def prices(self) -> PriceTable:
        """The registry's price table, else ``NOETA_PRICES`` over the catalogue (read once)."""
        if self.registry.prices is not None:
            return self.registry.prices
        if self._env_prices is None:
            self._env_prices = PriceTable.from_env()
        return self._env_prices

    def mcp_connections(self) -> Any:
        """The worker's MCP connections, created on first use (shared through the registry)."""
        if self.registry.mcp_connections is None:
            self.registry.mcp_connections = remote.load_connections(self.registry.mcp_commands)
        return self.registry.mcp_connections

    async def aclose(self) -> None:
        """Stop what the activities started: MCP connections and the stdio servers behind them,
        and the idle threads of the pools (a hung call keeps its thread until it returns)."""
        self.io_pool.close()
        self.user_code_pool.close()
        connections, self.registry.mcp_connections = self.registry.mcp_connections, None
        if connections is not None:
            await connections.aclose()

    def run(self, task_id: str, env: RunEnv | None, recorder: CallRecorder | None = None) -> ActiveRun:
        """What user code of ``task_id`` sees through expect_resource / expect_scope."""
        return ActiveRun(
            task_id=task_id,
            resources=self.pool.view(task_id, env),
            scope=deep_freeze(env.scope) if env is not None else {},
            recorder=recorder,
        )

    def _argument_validator(self, tool: Tool) -> Any:
        """A compiled validator per tool object: building one is most of a small tool call's cost."""
        cached = self._validators.get(tool.name)
        if cached is None or cached[0] is not tool:
            cached = (tool, schema_validator(tool.input_schema))
            self._validators[tool.name] = cached
        return cached[1]

    async def _io(self, fn: Any, *args: Any) -> Any:
        """Content-store I/O off the event loop, so every other activity's heartbeats keep going."""
        return await self.io_pool.run(fn, *args, label=getattr(fn, "__name__", "io"))

    async def _user_code(self, fn: Any, *args: Any, label: str, wait_seconds: float = THREAD_WAIT_SECONDS) -> Any:
        return await call_maybe_async(fn, *args, pool=self.user_code_pool, label=label, wait_seconds=wait_seconds)

    # -- finished steps ---------------------------------------------------------------------

    def _recorded(self, key: str, adapter: TypeAdapter[Any]) -> Any:
        """The output recorded for step ``key`` by an earlier attempt, or None."""
        ref = self.step_records.get(key) if key else None
        return None if ref is None else adapter.validate_json(self.store.get(ref))

    def _record(self, key: str, adapter: TypeAdapter[Any], output: Any) -> None:
        if key:
            self.step_records.put(key, self.store.put(adapter.dump_json(output), "application/json"))

    def activities(self) -> list[Any]:
        return [
            self.prepare_task,
            self.call_model,
            self.invoke_tool,
            self.validate_output,
            self.check_guards,
            self.load_transcript,
            self.release_resources,
        ]

    # -- prepare_task -----------------------------------------------------------------------

    @activity.defn(name=PREPARE_TASK)
    async def prepare_task(self, inp: PrepareInput) -> PrepareOutput:
        try:
            specs = [self._checked_spec(name, inp.expected_fingerprints.get(name)) for name in inp.tools]
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
            mcp_specs = await remote.list_specs(self.mcp_connections(), inp.mcp_servers) if inp.mcp_servers else []
            owned = owned_resources(self.registry.resources, inp, {s.name: s for s in specs})
            check_scope_schema(inp.scope_schema, inp.scope, self.registry.output_models)
            if inp.priced_provider is not None:
                await self._io(self._check_priced, inp.priced_provider, inp.priced_model)
            schema = self._output_json_schema(inp.output_schema)
        except NoetaError as err:
            raise to_application_error(err) from err
        taken = {spec.name for spec in specs}
        mcp_specs = [spec for spec in mcp_specs if spec.name not in taken]  # a worker's own tool wins
        specs += mcp_specs
        mcp_tools_ref = (
            self.store.put(remote.schemas_json(mcp_specs), "application/json") if mcp_specs else None
        )
        if owned:
            # Created before the first model call: a resource that cannot be made fails the task now.
            env = RunEnv(owned=[r.key for r in owned], inherited=dict(inp.inherited_resources))
            try:
                await self.pool.ready(inp.task_id, env)
            except NoetaError as err:
                await self.pool.release(inp.task_id)
                raise to_application_error(err) from err
        agents_ref = (
            await self._io(self.store.put, json.dumps(inp.agents).encode(), "application/json") if inp.agents else None
        )
        system, volatile, plan = compose_system(inp.system_prompt, inp.channels)
        schema_ref = (
            self.store.put(json.dumps(schema).encode(), "application/schema+json") if schema is not None else None
        )
        return PrepareOutput(
            tools=specs,
            system_ref=self.store.put(system.encode()) if system else None,
            output_schema_ref=schema_ref,
            volatile_ref=self.store.put(volatile.encode()) if volatile else None,
            plan=plan,
            mcp_tools_ref=mcp_tools_ref,
            resources=owned,
            agents_ref=agents_ref,
        )

    def _check_priced(self, provider_name: str, model: str | None) -> None:
        """A cost limit needs a price for the task's model: refuse the task before any token is spent."""
        provider = self.registry.providers.get(provider_name)
        if provider is None:
            return  # call_model reports the missing provider
        chosen = model_of(model, provider)
        if not self.prices.has_price(chosen, provider):
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

    def _checked_spec(self, name: str, expected: str | None) -> ToolSpec:
        tool = self.registry.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.registry.tools)) or "none"
            raise ToolNotRegisteredError(
                f"tool {name!r} is not registered on this worker (it has: {known}); start the "
                "worker with a registry that includes it"
            )
        spec = self.registry.tool_spec(name)
        if expected is not None and expected != spec.fingerprint:
            raise ToolIdentityMismatchError(
                f"tool {name!r} changed identity: the task recorded fingerprint {expected}, this "
                f"worker has {spec.fingerprint} (version {spec.version!r}). Run the task on a worker "
                "with the recorded tool version, or start a new task."
            )
        return spec

    # -- call_model -------------------------------------------------------------------------

    @activity.defn(name=CALL_MODEL)
    async def call_model(self, inp: CallModelInput) -> CallModelOutput:
        provider = self.registry.providers.get(inp.provider)
        if provider is None:
            known = ", ".join(sorted(self.registry.providers)) or "none"
            raise to_application_error(
                ProviderNotRegisteredError(
                    f"provider {inp.provider!r} is not registered on this worker (it has: {known})"
                )
            )
        ledger = AttemptLedger(inp.budget)
        if ledger.attempt > 1 and inp.step_key:  # did an earlier attempt finish unreported?
            recorded: CallModelOutput | None = await self._io(self._recorded, inp.step_key, _MODEL_OUTPUT)
            if recorded is not None:
                return dataclasses.replace(recorded, attempt=ledger.attempt, retried=ledger.earlier, from_record=True)
        ledger.check_lost()
        seconds = attempt_seconds()
        # The provider's own timeout is the whole attempt: the worker's deadline (just before it)
        # cuts first and records the timeout, whatever timeout the adapter was built with.
        timeout = activity.info().start_to_close_timeout
        request = await self._io(self._build_request, inp, timeout.total_seconds() if timeout else None)
        with instrument.model_call(inp.provider, request, inp.task_id, f"turn-{inp.turn}") as observed:
            try:
                work = self._limited(inp.provider, provider, request, inp)
                response = await with_heartbeat(work, as_details(ledger.earlier), seconds=seconds)
                if not isinstance(response, LLMResponse):
                    raise TypeError(f"complete() returned {type(response).__name__}, not LLMResponse")
            except asyncio.CancelledError:
                raise
            except AttemptTimedOut as exc:
                message = f"no answer within {exc.seconds:g} s (model_timeout_seconds)"
                raise ledger.failed(ProviderError(provider=inp.provider, message=message, retryable=True)) from None
            except Exception as exc:
                raise ledger.failed(classify_exception(inp.provider, exc)) from exc
            observed.finished(response)
        assistant = Message(role="assistant", content=list(response.content))
        output: CallModelOutput = await self._io(self._record_response, inp, assistant, response, provider, ledger)
        return output

    async def _limited(self, name: str, provider: Any, request: LLMRequest, inp: CallModelInput) -> Any:
        """The provider call, inside this worker's limit for the provider (if it has one)."""
        limiter = self.limiters.get(name)
        if limiter is None:
            return await self._complete(provider, request, inp)
        queue = min(MAX_QUEUE_SECONDS, (request.timeout_seconds or MAX_QUEUE_SECONDS * 4) / 4)
        async with limiter.slot(queue):
            return await self._complete(provider, request, inp)

    def _record_response(
        self, inp: CallModelInput, assistant: Message, response: LLMResponse, provider: Any, ledger: AttemptLedger
    ) -> CallModelOutput:
        """Store the extended transcript and the provider's raw response, price the call and record
        the step (one trip to the I/O pool: the price catalogue loads on first use); large answer
        text goes to history as a preview and a reference."""
        raw_ref = self.store.put(json.dumps(response.raw, default=str).encode(), "application/json") if response.raw else None
        head = self.transcripts.append(inp.head, [*inp.append, assistant])
        price = self.prices.price(response.usage, model_of(inp.model, provider), provider)
        usage = response.usage if price is None else dataclasses.replace(response.usage, cost_usd=price.usd)
        output = CallModelOutput(
            response=LLMResponse(
                stop_reason=response.stop_reason, content=self._inline_blocks(response.content), usage=usage
            ),
            head=head,
            raw_ref=raw_ref,
            attempt=ledger.attempt,
            retried=ledger.earlier,
            priced_as=price.source if price is not None else None,
            # NoetaModel of a task that named none: the provider's default, else what it reported.
            model=model_of(inp.model, provider) or reported_model(response.raw),
        )
        self._record(inp.step_key, _MODEL_OUTPUT, output)
        return output

    def _inline_blocks(self, content: list[Any]) -> list[Any]:
        """Text blocks over INLINE_ANSWER_LIMIT as a preview naming the stored whole (the stored
        transcript, and so the model, keep the full text)."""
        out = []
        for block in content:
            if isinstance(block, TextBlock) and len(block.text) * 4 > INLINE_ANSWER_LIMIT:
                data = block.text.encode()
                if len(data) > INLINE_ANSWER_LIMIT:
                    ref = self.store.put(data)
                    block = TextBlock(
                        text=block.text[:PREVIEW_CHARS] + f"… [answer of {len(data)} bytes in content store {ref.hash}]"
                    )
            out.append(block)
        return out

    def _build_request(self, inp: CallModelInput, timeout_seconds: float | None = None) -> LLMRequest:
        transcript = self.transcripts.load(inp.head) + tuple(inp.append)
        # Tools not in this worker's registry: remote MCP servers' and the declared sub-agents'.
        remote_tools = {**self._remote_schemas(inp.agents_ref), **self._remote_schemas(inp.mcp_tools_ref)}
        tools = [
            tool_schema(self.registry.tool_spec(n)) if n in self.registry.tools else remote_tools[n]
            for n in inp.tools
            if n in self.registry.tools or n in remote_tools
        ]
        volatile = self.store.get(inp.volatile_ref).decode() if inp.volatile_ref else ""
        messages, cache_breakpoint = compose_messages(self.transcripts.resolve(transcript), volatile)
        metadata: dict[str, Any] = {"task_id": inp.task_id, "turn": inp.turn}
        if cache_breakpoint is not None:
            metadata["cache_breakpoint_message"] = cache_breakpoint
        return LLMRequest(
            model=inp.model,
            messages=messages,
            tools=tools,
            system=self.store.get(inp.system_ref).decode() if inp.system_ref else None,
            temperature=inp.temperature,
            max_tokens=inp.max_tokens,
            metadata=metadata,
            output_schema=json.loads(self.store.get(inp.output_schema_ref)) if inp.output_schema_ref else None,
            thinking=inp.thinking,
            effort=inp.effort,
            timeout_seconds=timeout_seconds,
        )

    def _remote_schemas(self, ref: ContentRef | None) -> dict[str, dict[str, Any]]:
        """Tool shapes prepare stored (MCP tools, sub-agents) by name (read once per list, then kept)."""
        if ref is None:
            return {}
        cached = self._mcp_schemas.get(ref.hash)
        if cached is None:
            cached = {t["name"]: t for t in json.loads(self.store.get(ref))}
            if len(self._mcp_schemas) > 256:
                self._mcp_schemas.clear()
            self._mcp_schemas[ref.hash] = cached
        return cached

    def _complete(self, provider: Any, request: LLMRequest, inp: CallModelInput) -> Awaitable[Any]:
        """Stream when someone may listen for deltas (this worker's sink, or the delta broker) and
        the provider can; else a plain completion."""
        sink, broker = self.registry.delta_sink, self.delta_broker
        if (sink is None and not broker.wants_deltas()) or not isinstance(provider, StreamingProvider):
            # Synchronous providers share the I/O pool: a hung tool must not hold up model calls.
            return call_maybe_async(provider.complete, request, pool=self.io_pool, label=f"{inp.provider}.complete")
        info = activity.info()
        call_id, seq = f"turn-{inp.turn}", itertools.count()

        def on_delta(kind: str, text: str) -> None:
            delta = StreamDelta(
                task_id=inp.task_id, call_id=call_id, attempt=info.attempt, text=text, kind=kind, seq=next(seq)  # type: ignore[arg-type]
            )
            if sink is not None:
                try:
                    sink(delta)
                except Exception:  # a broken consumer must not fail the model call
                    logger.exception("delta_sink failed")
            broker.publish(info.workflow_namespace or "default", delta)

        return provider.stream(request, on_delta)

    # -- invoke_tool ------------------------------------------------------------------------

    @activity.defn(name=INVOKE_TOOL)
    async def invoke_tool(self, inp: InvokeToolInput) -> InvokeToolOutput:
        ledger = AttemptLedger(inp.budget)
        attempt = ledger.attempt
        if inp.reject_reason is not None:
            return InvokeToolOutput(ToolResult(success=False, output=inp.reject_reason), attempt)
        if inp.mcp is not None:
            return await self._invoke_remote(inp, ledger)
        try:
            self._checked_spec(inp.tool_name, inp.expected_fingerprint)
        except NoetaError as err:
            raise to_application_error(err) from err
        key = inp.idempotency_key
        if attempt > 1 and key:  # did an earlier attempt finish unreported?
            recorded_tool: InvokeToolOutput | None = await self._io(self._recorded, key, _TOOL_OUTPUT)
            if recorded_tool is not None:
                return dataclasses.replace(recorded_tool, attempt=attempt, retried=ledger.earlier, from_record=True)
        ledger.check_lost()
        tool: Tool = self.registry.tools[inp.tool_name]
        # input_schema is metadata for the model; checking arguments against it is opt-in.
        strict = inp.validate_input or getattr(tool, "validate_input", False) is True
        problem = argument_problem(tool.input_schema, inp.arguments, self._argument_validator(tool)) if strict else None
        if problem is not None:
            return InvokeToolOutput(
                ToolResult(
                    success=False,
                    output=f"Arguments for tool {inp.tool_name!r} do not match its input_schema: {problem}",
                ),
                attempt,
            )
        await self._ready(inp.task_id, inp.env)
        recorder = CallRecorder()
        run = self.run(inp.task_id, inp.env, recorder)
        ctx = ToolContext(
            task_id=inp.task_id,
            call_id=inp.call_id,
            tool_name=inp.tool_name,
            attempt=attempt,
            workspace_dir=inp.workspace_dir,
            idempotency_key=key,
            heartbeat=activity.heartbeat,
            resources=run.resources,
            scope=run.scope,
        )
        label = f"{inp.tool_name!r} ({ctx.idempotency_key})"
        seconds = attempt_seconds()
        # A thread must free up within a quarter of the attempt, else the call is handed back as a wait.
        wait = THREAD_WAIT_SECONDS if seconds is None else min(THREAD_WAIT_SECONDS, seconds / 4)
        with instrument.tool_call(inp.tool_name, inp.task_id, inp.call_id) as observed, activated(run):
            try:
                work = self._user_code(tool_callable(tool), inp.arguments, ctx, label=label, wait_seconds=wait)
                result = await with_heartbeat(work, as_details(ledger.earlier), seconds=seconds)
            except asyncio.CancelledError:
                raise
            except (ResourceNotFoundError, ScopeError) as err:  # configuration, not the model's doing
                raise to_application_error(err) from err
            except AttemptTimedOut as exc:
                timeout = ToolTimeoutError(f"tool {inp.tool_name!r} did not finish within {exc.seconds:g} s")
                raise ledger.failed(timeout) from None
            except (ToolRetryableError, WorkerBusyError) as err:
                raise ledger.failed(err) from err
            except Exception as exc:  # the model sees the failure and may recover
                result = ToolResult(success=False, output=f"{type(exc).__name__}: {exc}")
            result = checked_result(inp.tool_name, result)
            observed.finished(result)
        memories: list[str] = []
        if isinstance(result, RecallResult):  # only the built-in memory tool speaks for the engine
            memories = list(result.memories) if tool is memory_tool else []
            result = result.plain()
        output = InvokeToolOutput(
            result, attempt, retried=ledger.earlier, memories=memories, resource_calls=recorder.calls,
            resource_calls_dropped=recorder.dropped,
        )
        if needs_offload(result) or key:  # one trip: the large output and the step's record
            finished: InvokeToolOutput = await self._io(self._finish_tool, key, output)
            return finished
        return output

    def _finish_tool(self, key: str, output: InvokeToolOutput) -> InvokeToolOutput:
        """Offload a large output and record the finished step (before it is reported)."""
        if needs_offload(output.result):
            output = dataclasses.replace(output, result=self._offload_output(output.result))
        self._record(key, _TOOL_OUTPUT, output)
        return output

    async def _invoke_remote(self, inp: InvokeToolInput, ledger: AttemptLedger) -> InvokeToolOutput:
        """A remote MCP server's tool: an ``isError`` result goes back to the model as a failed
        result; a lost connection is retried (on a fresh connection, a restarted stdio server)."""
        target = inp.mcp
        assert target is not None
        key = inp.idempotency_key
        if ledger.attempt > 1 and key:  # did an earlier attempt finish unreported?
            recorded: InvokeToolOutput | None = await self._io(self._recorded, key, _TOOL_OUTPUT)
            if recorded is not None:
                return dataclasses.replace(recorded, attempt=ledger.attempt, retried=ledger.earlier, from_record=True)
        ledger.check_lost()
        timeout = activity.info().start_to_close_timeout
        with instrument.tool_call(inp.tool_name, inp.task_id, inp.call_id) as observed:
            try:
                called = await with_heartbeat(
                    self.mcp_connections().call_tool(
                        target.alias, target.server, target.tool, inp.arguments,
                        timeout.total_seconds() if timeout else None,
                    ),
                    as_details(ledger.earlier),
                )
            except asyncio.CancelledError:
                raise
            except NoetaError as err:
                raise ledger.failed(err) from err
            if any(getattr(item, "type", "") == "image" for item in called.content):  # stored: off the loop
                result = await self._io(remote.tool_result, called, self.store)
            else:
                result = remote.tool_result(called, self.store)
            observed.finished(result)
        output = InvokeToolOutput(result, ledger.attempt, retried=ledger.earlier)
        if needs_offload(result) or key:
            finished: InvokeToolOutput = await self._io(self._finish_tool, key, output)
            return finished
        return output

    def _offload_output(self, result: ToolResult) -> ToolResult:
        """Move a large output to the content store so history keeps only a reference."""
        output = result.output or ""
        data = output.encode()
        ref = self.store.put(data)
        preview = output[:PREVIEW_CHARS] + f"… [{len(data)} bytes in content store {ref.hash[:12]}]"
        return dataclasses.replace(result, output=preview, output_ref=ref)

    # -- load_transcript ----------------------------------------------------------------------

    @activity.defn(name=LOAD_TRANSCRIPT)
    async def load_transcript(self, inp: LoadTranscriptInput) -> LoadTranscriptOutput:
        """The stored transcript for a new run; the oldest messages are left out beyond max_bytes."""
        messages = list(await self._io(self.transcripts.load, inp.head))
        kept, size = 0, 0
        for message in reversed(messages):
            size += len(_MESSAGE.dump_json(message))
            if size > inp.max_bytes:
                break
            kept += 1
        return LoadTranscriptOutput(messages=messages[len(messages) - kept :], omitted=len(messages) - kept)

    # -- check_guards -------------------------------------------------------------------------

    @activity.defn(name=CHECK_GUARDS)
    async def check_guards(self, inp: CheckGuardsInput) -> CheckGuardsOutput:
        await self._ready(inp.task_id, inp.env)
        run = self.run(inp.task_id, inp.env)
        ctx = GuardContext(
            task_id=inp.task_id,
            trace_id=inp.trace_id,
            turn=inp.turn,
            metadata=dict(inp.metadata),
            resources=run.resources,
            scope=run.scope,
        )
        verdicts = []
        for action in inp.actions:
            for name in inp.guards:
                guard = self.registry.guards[name]
                with activated(run):
                    result = await with_heartbeat(self._user_code(guard.check, action, ctx, label=f"guard {name!r}"))
                if not isinstance(result, VerdictResult):
                    raise TypeError(f"guard {name!r} returned {type(result).__name__}, not VerdictResult")
                verdicts.append(GuardDecision(action.call_id, name, result.verdict, result.reason))
        decided = [combine([v for v in verdicts if v.call_id == a.call_id]) for a in inp.actions]
        instrument.approvals_requested(sum(1 for d in decided if d is not None and d.verdict == "ask"))
        return CheckGuardsOutput(verdicts=verdicts)

    # -- validate_output ----------------------------------------------------------------------

    @activity.defn(name=VALIDATE_OUTPUT)
    async def validate_output(self, inp: ValidateInput) -> ValidateOutput:
        data: Any = inp.answer
        if inp.output_schema is not None:
            parsed = parse_json_answer(inp.answer)
            if isinstance(parsed, ParseFailure):
                return ValidateOutput(ok=False, issue=parsed.message, failure_type="schema")
            model = self.registry.output_models.get(inp.output_schema.model or "")
            checked = check_schema(parsed, inp.output_schema.json_schema, model)
            if isinstance(checked, ParseFailure):
                return ValidateOutput(ok=False, data=parsed, issue=checked.message, failure_type="schema")
            data = checked
        await self._ready(inp.task_id, inp.env)
        run = self.run(inp.task_id, inp.env)
        for name in inp.validators:
            validator = self.registry.validators[name]
            with activated(run):
                verdict = await with_heartbeat(self._user_code(validator.fn, data, label=f"validator {name!r}"))
            if verdict is True:
                continue
            issue = verdict if isinstance(verdict, str) and verdict else DEFAULT_FAILURE_MESSAGE
            return ValidateOutput(ok=False, data=to_jsonable_python(data), issue=issue, failure_type="validator")
        return ValidateOutput(ok=True, data=to_jsonable_python(data))

    async def _ready(self, task_id: str, env: RunEnv | None) -> None:
        try:
            await self.pool.ready(task_id, env)
        except NoetaError as err:
            raise to_application_error(err) from err

    # -- release_resources --------------------------------------------------------------------

    @activity.defn(name=RELEASE_RESOURCES)
    async def release_resources(self, inp: ReleaseInput) -> ReleaseOutput:
        """The task ended: destroy its task-scoped resources that this process created."""
        released, errors = await self.pool.release(inp.task_id)
        return ReleaseOutput(released=released, errors=errors)
def checked_result(tool_name: str, result: Any) -> ToolResult:
    """A tool's return value as a ToolResult that history can hold: anything else is a failed
    result the model is told about (never an activity failure that would run the tool again)."""
    if not isinstance(result, ToolResult):
        return ToolResult(success=False, output=f"tool {tool_name!r} returned {type(result).__name__}, not ToolResult")
    if result.output is not None and not isinstance(result.output, str):
        return ToolResult(
            success=False,
            output=f"tool {tool_name!r} returned an output of type {type(result.output).__name__}; "
            "ToolResult.output must be a string",
        )
    return result


def reported_model(raw: Any) -> str | None:
    """The ``model`` a provider's raw response names (OpenAI- and Anthropic-shaped ones do)."""
    model = raw.get("model") if isinstance(raw, dict) else None
    return model if isinstance(model, str) and model else None


def needs_offload(result: ToolResult) -> bool:
    output = result.output
    # len() in characters bounds the UTF-8 size from below: only a long output can be too large.
    return (
        output is not None
        and result.output_ref is None
        and len(output) * 4 > INLINE_OUTPUT_LIMIT
        and len(output.encode()) > INLINE_OUTPUT_LIMIT
    )


@dataclasses.dataclass(frozen=True)
class ParseFailure:
    message: str


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def parse_json_answer(text: str) -> Any:
    """The answer as JSON (a Markdown code fence around it is tolerated)."""
    fenced = _FENCE.match(text)
    try:
        return json.loads(fenced.group(1) if fenced else text)
    except json.JSONDecodeError as err:
        return ParseFailure(f"The answer must be a JSON document matching the output schema; it is not valid JSON ({err.msg} at line {err.lineno} column {err.colno}).")


def check_schema(data: Any, schema: dict[str, Any], model: type[BaseModel] | None) -> Any:
    """``data`` validated: a model instance when the worker has the model, else the JSON itself."""
    if model is not None:
        try:
            return model.model_validate(data)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in err.errors()
            )
            return ParseFailure(f"The answer does not match the output schema: {problems}.")
    problem = argument_problem(schema, data)
    return data if problem is None else ParseFailure(f"The answer does not match the output schema: {problem}.")


def schema_validator(schema: dict[str, Any]) -> Any:
    return jsonschema.validators.validator_for(schema)(schema)


def argument_problem(schema: dict[str, Any], arguments: Any, validator: Any = None) -> str | None:
    """Why ``arguments`` fail ``schema``, or None. A broken schema is not the model's fault."""
    try:
        error = jsonschema.exceptions.best_match((validator or schema_validator(schema)).iter_errors(arguments))
    except jsonschema.exceptions.SchemaError:
        return None
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{error.message}" + (f" (at {where})" if where else "")
