"""The ``invoke_agent`` span of each task run (OpenTelemetry GenAI semantic conventions), made on
the workflow side without recording anything in history.

Its ids are derived from the run's own ids (:mod:`noeta.protocols.trace_context`), so every replay
and every worker that picks the task up computes the same span. Its parent is the caller's span
(the start's ``noeta-trace`` header, see :mod:`.trace_headers`); without a caller it is a root
span whose trace id is derived from the task. The workflow names it in the ``noeta-trace`` header
of each activity (its model and tool spans are then its children) and of each sub-agent (whose own
``invoke_agent`` span is then its child), and hands the caller's header on to the next run at
continue-as-new (the runs of a task are siblings in one trace).

A workflow cannot keep a span open across replays and workers, so the span is exported twice
with the same ids (never while replaying): when the run starts, ended at once and marked
``noeta.span.phase=started``, so that a task waiting for days (an approval) shows its root span
and its children are no orphans meanwhile; and when the run ends, with the run's start and end
times and its outcome (``noeta.span.phase=ended``). A backend that keeps the last write of a span
id shows the whole run; one that keeps both shows the start as a zero-length span beside it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import temporalio.client
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError, CancelledError, FailureError
from temporalio.worker import (
    ContinueAsNewInput,
    ExecuteWorkflowInput,
    Interceptor,
    StartActivityInput,
    StartChildWorkflowInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from noeta.protocols.interaction import TaskResult
from noeta.protocols.names import HEADER_TRACE
from noeta.protocols.task import TaskInput
from noeta.protocols.trace_context import SpanRef, derived_span_id, derived_trace_id
from noeta.telemetry.trace_headers import header, span_of, with_header
from noeta.telemetry.tracing import active_tracer, tracing_enabled

logger = logging.getLogger(__name__)

#: The extern function (outside the workflow sandbox) that exports a finished run's span.
EMIT_FUNCTION = "noeta_emit_agent_span"
#: ``gen_ai.agent.name`` of a task that is not a declared sub-agent.
DEFAULT_AGENT_NAME = "noeta"
#: Who serves each provider registered on this process's workers, by registry name (filled as a
#: worker is built): the workflow knows only the registry name of its task's provider.
_provider_systems: dict[str, str] = {}


def remember_providers(systems: Mapping[str, str]) -> None:
    """Record ``gen_ai.provider.name`` for registry names (a worker's providers, as it is built), so
    the ``invoke_agent`` spans of the tasks it runs name who serves them."""
    _provider_systems.update(systems)


@dataclasses.dataclass(frozen=True)
class FinishedRun:
    """What the workflow hands out of the sandbox to export a run's span."""

    name: str
    span: SpanRef
    parent: SpanRef | None
    start_ns: int
    end_ns: int
    attributes: Mapping[str, str | int | float | bool]
    error: str | None = None


class AgentSpanInterceptor(temporalio.client.Interceptor, Interceptor):
    """Worker interceptor for the ``invoke_agent`` span; inactive (no header, no span) when tracing
    was off as the client it came with connected, so tasks then pay nothing for it. A client
    interceptor too (passing client calls through) so that workers built on the client inherit it."""

    def __init__(self, enabled: bool | None = None) -> None:
        """``enabled``: whether workers make the span (default: whether tracing is on now)."""
        self.enabled = tracing_enabled() if enabled is None else enabled

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor] | None:
        """The workflow-side interceptor, when enabled."""
        if not self.enabled:
            return None
        input.unsafe_extern_functions[EMIT_FUNCTION] = export_run
        return _AgentSpanInbound


class _AgentSpanInbound(WorkflowInboundInterceptor):
    caller: SpanRef | None = None
    caller_header: Payload | None = None
    span: SpanRef | None = None

    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_AgentSpanOutbound(outbound, self))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        info = workflow.info()
        self.caller = span_of(input.headers)
        self.caller_header = header(self.caller) if self.caller is not None else None
        trace_id = self.caller.trace_id if self.caller else derived_trace_id(info.workflow_id, info.first_execution_run_id)
        flags = self.caller.flags if self.caller else 1
        self.span = SpanRef(trace_id, derived_span_id(info.run_id), flags)
        task = input.args[0] if input.args and isinstance(input.args[0], TaskInput) else None
        attributes = _task_attributes(task)
        self._emit(attributes, phase="started")
        try:
            result = await super().execute_workflow(input)
        except workflow.ContinueAsNewError:
            self._finish(attributes | {"noeta.continued_as_new": True})
            raise
        except (CancelledError, asyncio.CancelledError):
            self._finish(attributes, "cancelled")
            raise
        except FailureError as err:  # fails the run (other exceptions fail only a workflow task)
            error = err.type if isinstance(err, ApplicationError) and err.type else type(err).__name__
            self._finish(attributes, error)
            raise
        self._finish(attributes | _result_attributes(result))
        return result

    def _finish(self, attributes: Mapping[str, str | int | float | bool], error: str | None = None) -> None:
        self._emit(attributes, error, phase="ended")

    def _emit(self, attributes: Mapping[str, str | int | float | bool], error: str | None = None, *, phase: str) -> None:
        if workflow.unsafe.is_replaying() or self.span is None:
            return
        info = workflow.info()
        name = f"invoke_agent {attributes.get('gen_ai.agent.name', DEFAULT_AGENT_NAME)}"
        start_ns = int(info.start_time.timestamp() * 1e9)
        end_ns = start_ns if phase == "started" else workflow.time_ns()
        marked = {**attributes, "noeta.span.phase": phase}
        run = FinishedRun(name, self.span, self.caller, start_ns, end_ns, marked, error)
        emit: Callable[[FinishedRun], None] = workflow.extern_functions()[EMIT_FUNCTION]
        emit(run)


class _AgentSpanOutbound(WorkflowOutboundInterceptor):
    def __init__(self, next: WorkflowOutboundInterceptor, root: _AgentSpanInbound) -> None:
        super().__init__(next)
        self.root = root

    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        input.headers = with_header(input.headers, self.root.span)
        return super().start_activity(input)

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        input.headers = with_header(input.headers, self.root.span)
        return super().start_local_activity(input)

    async def start_child_workflow(self, input: StartChildWorkflowInput) -> workflow.ChildWorkflowHandle[Any, Any]:
        input.headers = with_header(input.headers, self.root.span)
        return await super().start_child_workflow(input)

    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        if self.root.caller_header is not None:
            input.headers = {**input.headers, HEADER_TRACE: self.root.caller_header}
        super().continue_as_new(input)


def _task_attributes(task: TaskInput | None) -> dict[str, str | int | float | bool]:
    info = workflow.info()
    attributes: dict[str, str | int | float | bool] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": info.workflow_id,
        "gen_ai.conversation.id": info.workflow_id,
        "noeta.run_id": info.run_id,
    }
    if task is None:
        return attributes
    agent = task.metadata.get("agent") if isinstance(task.metadata, dict) else None
    attributes["gen_ai.agent.name"] = agent if isinstance(agent, str) and agent else DEFAULT_AGENT_NAME
    attributes["noeta.provider"] = task.provider
    if task.model:
        attributes["gen_ai.request.model"] = task.model
    parent = task.metadata.get("parent") if isinstance(task.metadata, dict) else None
    if isinstance(parent, str):
        attributes["noeta.parent_task_id"] = parent
    return attributes


def _result_attributes(result: Any) -> dict[str, str | int | float | bool]:
    if not isinstance(result, TaskResult):
        return {}
    usage = result.usage
    return {
        "noeta.status": result.status,
        "noeta.turns": result.turns,
        "gen_ai.usage.input_tokens": usage.input,
        "gen_ai.usage.output_tokens": usage.output,
        "noeta.cost_usd": usage.cost_usd,
    }


# -- outside the sandbox: export the finished span -------------------------------------------------


class _FixedIds:
    """An OpenTelemetry id generator that hands out the ids already derived for a span."""

    def __init__(self, trace_id: int, span_id: int) -> None:
        self.trace_id, self.span_id = trace_id, span_id

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id

    def is_trace_id_random(self) -> bool:
        return False  # derived from the task's ids (W3C trace context level 2's "random" flag)


def export_run(run: FinishedRun) -> None:
    """Export ``run``'s span through the process's tracer provider (nothing while tracing is off).
    The provider's sampler and processors apply as to any span; only its ids are given. A failure
    is logged, never the task's: telemetry must not fail a workflow task."""
    try:
        _export(run)
    except Exception:
        logger.exception("the invoke_agent span of run %s was not exported", run.attributes.get("noeta.run_id"))


def _export(run: FinishedRun) -> None:
    tracer = active_tracer()
    if tracer is None or not hasattr(tracer, "id_generator"):
        return
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    attributes = dict(run.attributes)
    system = _provider_systems.get(str(attributes.get("noeta.provider")))
    if system is not None:
        attributes["gen_ai.provider.name"] = system
    fixed = copy.copy(tracer)  # the SDK tracer takes its ids from this attribute
    fixed.id_generator = _FixedIds(int(run.span.trace_id, 16), int(run.span.span_id, 16))
    context = None
    if run.parent is not None:
        parent = trace.SpanContext(
            int(run.parent.trace_id, 16), int(run.parent.span_id, 16), is_remote=True,
            trace_flags=trace.TraceFlags(run.parent.flags),
        )
        context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    span = fixed.start_span(
        run.name, context=context, kind=trace.SpanKind.INTERNAL, attributes=attributes, start_time=run.start_ns
    )
    if run.error is not None:
        span.set_attribute("error.type", run.error)
        span.set_status(Status(StatusCode.ERROR, run.error))
    span.end(end_time=run.end_ns)


__all__ = ["AgentSpanInterceptor", "FinishedRun", "export_run", "remember_providers"]
