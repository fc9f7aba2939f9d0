"""The worker's activities: the I/O side of AgentWorkflow.

``prepare_task`` records the task's tools (with their identity fingerprints) and stores the system
prompt; ``call_model`` rebuilds the transcript from the content store, calls the provider and
stores the extended transcript; ``invoke_tool`` runs one tool call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from typing import TYPE_CHECKING, Any

import jsonschema
from temporalio import activity

from noeta.activities._errors import to_application_error
from noeta.activities._heartbeat import with_heartbeat
from noeta.context.transcript import TranscriptStore
from noeta.errors import (
    NoetaError,
    ProviderNotRegisteredError,
    ToolIdentityMismatchError,
    ToolNotRegisteredError,
    ToolRetryableError,
)
from noeta.protocols.messages import LLMRequest, LLMResponse, Message
from noeta.protocols.task import (
    CALL_MODEL,
    INVOKE_TOOL,
    PREPARE_TASK,
    CallModelInput,
    CallModelOutput,
    InvokeToolInput,
    InvokeToolOutput,
    PrepareInput,
    PrepareOutput,
)
from noeta.protocols.tool import Tool, ToolContext, ToolResult, ToolSpec
from noeta.providers.errors import classify_exception

if TYPE_CHECKING:
    from noeta.worker import Registry

#: Tool outputs larger than this go to the content store; history keeps a reference and a preview.
INLINE_OUTPUT_LIMIT = 4096
PREVIEW_CHARS = 512


async def call_maybe_async(fn: Any, *args: Any) -> Any:
    """Call a sync or async callable; sync ones run in a thread so heartbeats keep flowing."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(result):
        return await result
    return result


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """The provider-neutral tool shape put in ``LLMRequest.tools``."""
    return {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}


class AgentActivities:
    def __init__(self, registry: "Registry") -> None:
        self.registry = registry
        self.store = registry.content_store
        self.transcripts = TranscriptStore(registry.content_store)

    def activities(self) -> list[Any]:
        return [self.prepare_task, self.call_model, self.invoke_tool]

    # -- prepare_task -----------------------------------------------------------------------

    @activity.defn(name=PREPARE_TASK)
    async def prepare_task(self, inp: PrepareInput) -> PrepareOutput:
        try:
            specs = [self._checked_spec(name, inp.expected_fingerprints.get(name)) for name in inp.tools]
        except NoetaError as err:
            raise to_application_error(err) from err
        system_ref = self.store.put(inp.system_prompt.encode()) if inp.system_prompt else None
        return PrepareOutput(tools=specs, system_ref=system_ref)

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
        transcript = self.transcripts.load(inp.head) + tuple(inp.append)
        specs = [self.registry.tool_spec(n) for n in inp.tools if n in self.registry.tools]
        request = LLMRequest(
            model=inp.model,
            messages=self.transcripts.resolve(transcript),
            tools=[tool_schema(s) for s in specs],
            system=self.store.get(inp.system_ref).decode() if inp.system_ref else None,
            temperature=inp.temperature,
            max_tokens=inp.max_tokens,
            metadata={"task_id": inp.task_id, "turn": inp.turn},
        )
        try:
            response = await with_heartbeat(call_maybe_async(provider.complete, request))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise to_application_error(classify_exception(inp.provider, exc)) from exc
        if not isinstance(response, LLMResponse):
            raise to_application_error(
                classify_exception(
                    inp.provider, TypeError(f"complete() returned {type(response).__name__}, not LLMResponse")
                )
            )
        raw_ref = (
            self.store.put(json.dumps(response.raw, default=str).encode(), "application/json")
            if response.raw
            else None
        )
        assistant = Message(role="assistant", content=list(response.content))
        head = self.transcripts.append(inp.head, [*inp.append, assistant])
        return CallModelOutput(
            response=LLMResponse(
                stop_reason=response.stop_reason, content=list(response.content), usage=response.usage
            ),
            head=head,
            raw_ref=raw_ref,
            attempt=activity.info().attempt,
        )

    # -- invoke_tool ------------------------------------------------------------------------

    @activity.defn(name=INVOKE_TOOL)
    async def invoke_tool(self, inp: InvokeToolInput) -> InvokeToolOutput:
        attempt = activity.info().attempt
        if inp.reject_reason is not None:
            return InvokeToolOutput(ToolResult(success=False, output=inp.reject_reason), attempt)
        try:
            self._checked_spec(inp.tool_name, inp.expected_fingerprint)
        except NoetaError as err:
            raise to_application_error(err) from err
        tool: Tool = self.registry.tools[inp.tool_name]
        problem = argument_problem(tool.input_schema, inp.arguments)
        if problem is not None:
            return InvokeToolOutput(
                ToolResult(
                    success=False,
                    output=f"Arguments for tool {inp.tool_name!r} do not match its input_schema: {problem}",
                ),
                attempt,
            )
        ctx = ToolContext(
            task_id=inp.task_id,
            call_id=inp.call_id,
            tool_name=inp.tool_name,
            attempt=attempt,
            workspace_dir=inp.workspace_dir,
            heartbeat=activity.heartbeat,
            resources=self.registry.resources,
        )
        try:
            result = await with_heartbeat(call_maybe_async(tool.invoke, inp.arguments, ctx))
        except asyncio.CancelledError:
            raise
        except ToolRetryableError as err:
            raise to_application_error(err) from err
        except Exception as exc:  # the model sees the failure and may recover
            result = ToolResult(success=False, output=f"{type(exc).__name__}: {exc}")
        if not isinstance(result, ToolResult):
            result = ToolResult(
                success=False,
                output=f"tool {inp.tool_name!r} returned {type(result).__name__}, not ToolResult",
            )
        return InvokeToolOutput(self._offload_output(result), attempt)

    def _offload_output(self, result: ToolResult) -> ToolResult:
        """Move a large output to the content store so history keeps only a reference."""
        output = result.output
        if output is None or result.output_ref is not None:
            return result
        data = output.encode()
        if len(data) <= INLINE_OUTPUT_LIMIT:
            return result
        ref = self.store.put(data)
        preview = output[:PREVIEW_CHARS] + f"… [{len(data)} bytes in content store {ref.hash[:12]}]"
        return dataclasses.replace(result, output=preview, output_ref=ref)

def argument_problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` fail ``schema``, or None. A broken schema is not the model's fault."""
    try:
        validator_cls = jsonschema.validators.validator_for(schema)
        error = jsonschema.exceptions.best_match(validator_cls(schema).iter_errors(arguments))
    except jsonschema.exceptions.SchemaError:
        return None
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{error.message}" + (f" (at {where})" if where else "")
