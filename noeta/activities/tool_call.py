"""``invoke_tool``: run one tool call (a registered tool, or a remote MCP server's tool) while
heartbeating; a large output goes to the content store.

:class:`ToolCalls` serves it from the worker's shared services and its MCP servers; it owns the
compiled argument validators of the registered tools.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from typing import Any

from pydantic import TypeAdapter
from temporalio import activity

from noeta.activities import mcp as remote
from noeta.activities._attempts import AttemptLedger, as_details
from noeta.activities._errors import to_application_error
from noeta.activities._heartbeat import AttemptTimedOut, attempt_seconds, beat, with_heartbeat
from noeta.activities._schema import argument_problem, schema_validator
from noeta.activities._store_writes import stored
from noeta.activities.held_questions import QuestionHolder
from noeta.activities._services import PREVIEW_CHARS, THREAD_WAIT_SECONDS, WorkerServices, checked_spec
from noeta.builtins.memory.tool import RecallResult, memory_tool
from noeta.errors import (
    ContentIntegrityError,
    ContentMissingError,
    NoetaError,
    ResourceNotFoundError,
    ScopeError,
    ToolRetryableError,
    ToolTimeoutError,
    WorkerBusyError,
)
from noeta.protocols.activity_io import InvokeToolInput, InvokeToolOutput
from noeta.protocols.names import INVOKE_TOOL
from noeta.protocols.tool import Tool, ToolContext, ToolResult
from noeta.resources.context import CallRecorder, activated
from noeta.telemetry import instrument

_TOOL_OUTPUT = TypeAdapter(InvokeToolOutput)

#: Tool outputs larger than this go to the content store; history keeps a reference and a preview.
INLINE_OUTPUT_LIMIT = 4096


def tool_callable(tool: Tool) -> Any:
    """What to call for ``tool``: an ``@tool`` around an async function is awaited on the event loop;
    its sync ``invoke`` wrapper would cost a thread that a hung synchronous tool may be holding."""
    fn = getattr(tool, "fn", None)
    return fn if inspect.iscoroutinefunction(fn) else tool.invoke


class ToolCalls:
    """``invoke_tool`` for registered tools and remote MCP servers' tools."""

    def __init__(self, services: WorkerServices, mcp: remote.McpServers) -> None:
        """``services``: the worker's shared services; ``mcp``: its connections to remote MCP servers."""
        self.services = services
        self.registry = services.registry
        self.mcp = mcp
        self._argument_validators: dict[str, tuple[Tool, Any]] = {}  # by tool name, for that tool object

    @activity.defn(name=INVOKE_TOOL)
    async def invoke_tool(self, inp: InvokeToolInput) -> InvokeToolOutput:
        """Run one tool call: a rejected call's reason, or arguments that fail the schema, come back
        as a failed result; a tool's exception too (the model may recover); a timeout, a
        ToolRetryableError or no free thread is retried."""
        ledger = AttemptLedger(inp.budget)
        out = await self._invoke(inp, ledger)
        ledger.done()
        return out

    async def _invoke(self, inp: InvokeToolInput, ledger: AttemptLedger) -> InvokeToolOutput:
        attempt = ledger.attempt
        if inp.reject_reason is not None:
            return InvokeToolOutput(ToolResult(success=False, output=inp.reject_reason), attempt)
        if inp.mcp is not None:
            return await self._invoke_remote(inp, ledger)
        try:
            checked_spec(self.registry, inp.tool_name, inp.expected_fingerprint)
        except NoetaError as err:
            raise to_application_error(err) from err
        key = inp.idempotency_key
        recorded = await self.services.steps.earlier(key, ledger, _TOOL_OUTPUT)
        if recorded is not None:
            return recorded
        held = self.services.held.take(key) if key else None
        if isinstance(held, InvokeToolOutput):  # it finished; the store would not take its output
            return await self._finished(key, dataclasses.replace(held, attempt=attempt), ledger)
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
        recorder = CallRecorder()
        run = await self.services.active_run(inp.task_id, inp.env, recorder)
        ctx = ToolContext(
            task_id=inp.task_id,
            call_id=inp.call_id,
            tool_name=inp.tool_name,
            attempt=attempt,
            workspace_dir=inp.workspace_dir,
            idempotency_key=key,
            heartbeat=beat,
            resources=run.resources,
            scope=run.scope,
        )
        label = f"{inp.tool_name!r} ({ctx.idempotency_key})"
        seconds = attempt_seconds()
        # A thread must free up within a quarter of the attempt, else the call is handed back as a wait.
        wait = THREAD_WAIT_SECONDS if seconds is None else min(THREAD_WAIT_SECONDS, seconds / 4)
        with instrument.tool_call(inp.tool_name, inp.task_id, inp.call_id) as observed, activated(run):
            try:
                work = self.services.user_code(tool_callable(tool), inp.arguments, ctx, label=label, wait_seconds=wait)
                result = await with_heartbeat(work, as_details(ledger.earlier), seconds=seconds)
            except asyncio.CancelledError:
                raise
            except (ResourceNotFoundError, ScopeError, ContentIntegrityError, ContentMissingError) as err:
                # configuration, or a stored body the tool read is damaged or gone: not the model's doing
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
        return await self._finished(key, output, ledger)

    def _argument_validator(self, tool: Tool) -> Any:
        """A compiled validator per tool object: building one is most of a small tool call's cost."""
        cached = self._argument_validators.get(tool.name)
        if cached is None or cached[0] is not tool:
            cached = (tool, schema_validator(tool.input_schema))
            self._argument_validators[tool.name] = cached
        return cached[1]

    async def _finished(self, key: str, output: InvokeToolOutput, ledger: AttemptLedger) -> InvokeToolOutput:
        """The call's output as history gets it: a large output offloaded, the step recorded
        under ``key`` (one trip to the I/O pool for both). A store that cannot take them does not
        run the tool again: only the write is retried (noeta.activities._store_writes)."""
        if not (needs_offload(output.result) or key):
            return output

        async def write() -> InvokeToolOutput:
            done = output if len(ledger.earlier) == len(output.retried) else dataclasses.replace(
                output, retried=ledger.earlier  # the store's failures of this attempt, for the event log
            )
            finished: InvokeToolOutput = await self.services.io(self._finish_tool, key, done)
            return finished

        def hold() -> None:
            if key:
                self.services.held.keep(key, output, len(output.result.output or ""))

        return await stored(ledger, write, hold)

    def _finish_tool(self, key: str, output: InvokeToolOutput) -> InvokeToolOutput:
        """Offload a large output and record the finished step (before it is reported)."""
        if needs_offload(output.result):
            output = dataclasses.replace(output, result=self._offload_output(output.result))
        self.services.steps.record(key, _TOOL_OUTPUT, output)
        return output

    async def _invoke_remote(self, inp: InvokeToolInput, ledger: AttemptLedger) -> InvokeToolOutput:
        """A remote MCP server's tool: an ``isError`` result goes back to the model as a failed
        result; a lost connection is retried (on a fresh connection, a restarted stdio server)."""
        target = inp.mcp
        assert target is not None
        key = inp.idempotency_key
        recorded = await self.services.steps.earlier(key, ledger, _TOOL_OUTPUT)
        if recorded is not None:
            return recorded
        ledger.check_lost()
        timeout = activity.info().start_to_close_timeout
        hold = QuestionHolder(inp) if QuestionHolder.wanted(inp) else None
        with instrument.tool_call(inp.tool_name, inp.task_id, inp.call_id) as observed:
            try:
                called = await with_heartbeat(
                    self.mcp.call_tool(
                        target, inp.arguments, timeout.total_seconds() if timeout else None, inp.elicitation_answers,
                        inp.sampled, hold,
                    ),
                    as_details(ledger.earlier),
                )
            except asyncio.CancelledError:
                raise
            except NoetaError as err:
                raise ledger.failed(err) from err
            if any(getattr(item, "type", "") == "image" for item in called.content):  # stored: off the loop
                result = await self.services.io(remote.tool_result, called, self.services.store)
            else:
                result = remote.tool_result(called, self.services.store)
            observed.finished(result)
        return await self._finished(key, InvokeToolOutput(result, ledger.attempt, retried=ledger.earlier), ledger)

    def _offload_output(self, result: ToolResult) -> ToolResult:
        """Move a large output to the content store so history keeps only a reference."""
        output = result.output or ""
        data = output.encode()
        ref = self.services.store.put(data)
        preview = output[:PREVIEW_CHARS] + f"… [{len(data)} bytes in content store {ref.hash[:12]}]"
        return dataclasses.replace(result, output=preview, output_ref=ref)


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


def needs_offload(result: ToolResult) -> bool:
    """Whether ``result``'s output is too large to travel inline (over INLINE_OUTPUT_LIMIT bytes of
    UTF-8) and must go to the content store."""
    output = result.output
    # len() in characters bounds the UTF-8 size from below: only a long output can be too large.
    return (
        output is not None
        and result.output_ref is None
        and len(output) * 4 > INLINE_OUTPUT_LIMIT
        and len(output.encode()) > INLINE_OUTPUT_LIMIT
    )
