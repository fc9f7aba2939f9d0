"""One typed function per step the workflow schedules: each takes its kind's ActivityOptions from
the task (noeta.protocols.activity_options), resolves what they leave to the task or the tool, and
returns the activity's typed output (or raises the task's typed error)."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError

from noeta.protocols.activity_io import (
    CallModelInput,
    CallModelOutput,
    CheckGuardsInput,
    CheckGuardsOutput,
    InvokeToolInput,
    InvokeToolOutput,
    LoadTranscriptInput,
    LoadTranscriptOutput,
    PrepareInput,
    PrepareOutput,
    ReleaseInput,
    ReleaseOutput,
    ValidateInput,
    ValidateOutput,
)
from noeta.protocols.activity_options import GUARD_TIMEOUT_SECONDS, LOST_ATTEMPT_MAX_BACKOFF_SECONDS, ActivityOptions
from noeta.protocols.names import (
    CALL_MODEL,
    CHECK_GUARDS,
    INVOKE_TOOL,
    LOAD_TRANSCRIPT,
    PATCH_BUILTIN_POLICY_CHILDREN,
    PATCH_LEAN_STEPS,
    PATCH_LOCAL_MODEL_CALLS,
    PATCH_LOCAL_REPORTS,
    PATCH_TASK_RESOURCES,
    PREPARE_TASK,
    RELEASE_RESOURCES,
    SHAPE_LOCAL_MODEL_CALLS_BY_DATA,
    VALIDATE_OUTPUT,
    WORKFLOW_NAME,
    workflow_name_for,
)
from noeta.protocols.local_model_calls import (
    EARLIER_LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK,
    LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK,
    ModelCallStart,
    local_model_attempt_seconds,
    model_call_activity_id,
)
from noeta.protocols.scope import merge_scopes
from noeta.protocols.task import (
    TASK_FATAL_TOOL_ERRORS,
    AttemptBudget,
    TaskInput,
    TaskResult,
    attempts_cap,
    subagent_tool,
)
from noeta.protocols.tool import ToolSpec
from noeta.temporal.search_attributes import TENANT
from noeta.workflows import local_tools, patches
from noeta.workflows.failures import provider_failure, raise_if_cancelled, typed_task_error
from noeta.workflows.local_calls import execute_local_call

T = TypeVar("T")

#: Steps that only touch the worker's registry and content store (prepare, load, release): a
#: minute per attempt, no heartbeat, the default backoff. Not an option: nothing slow runs there.
BOOKKEEPING_SECONDS = 60.0
BOOKKEEPING = ActivityOptions(start_to_close_seconds=BOOKKEEPING_SECONDS)


def retry_policy(
    options: ActivityOptions, max_retries: int, non_retryable: tuple[str, ...] = (), *, ledger: bool = False
) -> RetryPolicy:
    """``max_retries`` retries after the first attempt, on ``options``' backoff (1 s, 2 s, 4 s ... at
    most 60 s by default).

    ``ledger``: the call's worker counts attempts itself (an AttemptBudget in its input) and sets
    the delay after every failure it records, so Temporal's count is only a safety net. What is left
    to this policy are lost attempts (a killed worker): retried on the same backoff capped at
    LOST_ATTEMPT_MAX_BACKOFF_SECONDS (1, 2, 4, 8, then 10 s by default), since another worker is
    usually there to take the call."""
    most, attempts = options.retry_max_seconds, max_retries + 1
    if ledger:
        most = max(options.retry_initial_seconds, min(most, LOST_ATTEMPT_MAX_BACKOFF_SECONDS))
        attempts = attempts_cap(max_retries)
    return RetryPolicy(
        initial_interval=timedelta(seconds=options.retry_initial_seconds),
        backoff_coefficient=options.retry_backoff_coefficient,
        maximum_interval=timedelta(seconds=most),
        maximum_attempts=attempts,
        non_retryable_error_types=list(non_retryable),
    )


def attempt_budget(task: TaskInput, options: ActivityOptions, max_retries: int) -> AttemptBudget:
    """What a model or tool call may spend on retries, and the backoff its worker applies."""
    return AttemptBudget(
        max_retries, task.rate_limit_wait_seconds, options.backoff(), max_outage_seconds=task.store_outage_wait_seconds
    )


async def execute(
    name: str,
    inp: Any,
    result_type: type[T],
    summary: str,
    options: ActivityOptions,
    *,
    start_to_close: float,
    retry: RetryPolicy,
    heartbeat: float | None,
) -> T:
    """Schedule activity ``name`` with ``options`` (``start_to_close``: as resolved for this call,
    ``heartbeat``: None for a step that does not heartbeat)."""
    out: T = await workflow.execute_activity(
        name,
        inp,
        result_type=result_type,
        start_to_close_timeout=timedelta(seconds=start_to_close),
        schedule_to_close_timeout=(
            None if options.schedule_to_close_seconds is None else timedelta(seconds=options.schedule_to_close_seconds)
        ),
        heartbeat_timeout=None if heartbeat is None else timedelta(seconds=heartbeat),
        retry_policy=retry,
        summary=summary,
    )
    return out


async def execute_local(name: str, inp: Any, result_type: type[T], summary: str, retry: RetryPolicy) -> T:
    """A bookkeeping step as a local activity: on the worker that runs the workflow, recorded as a
    marker (a round trip through the server and five history events fewer)."""
    out: T = await workflow.execute_local_activity(
        name, inp, result_type=result_type, start_to_close_timeout=timedelta(seconds=BOOKKEEPING_SECONDS),
        retry_policy=retry, summary=summary,
    )
    return out


def step_key(name: str) -> str:
    """The key of one logical step of this run: unique per run, the same on every replay and
    attempt (the worker records finished steps under it; tools get it as their idempotency key)."""
    info = workflow.info()
    return f"{info.workflow_id}/{info.run_id}/{name}"


def short_arguments(arguments: dict[str, Any], limit: int = 80) -> str:
    """``arguments`` as compact JSON, cut to ``limit`` characters."""
    text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def provider_retries(task: TaskInput) -> int:
    """Retries of a model call: ``provider_retries``, else ``max_retries`` (validation's)."""
    return task.max_retries if task.provider_retries is None else task.provider_retries


def tool_retries(task: TaskInput) -> int:
    """Retries of a tool call: ``tool_retries``, else ``max_retries``."""
    return task.max_retries if task.tool_retries is None else task.tool_retries


async def prepare(task: TaskInput) -> PrepareOutput:
    """Check the task's tools, validators and guards against this worker (and, with a cost limit,
    that its model has a price); store the system prompt."""
    priced = task.limits is not None and task.limits.max_cost_usd is not None
    inp = PrepareInput(
        task_id=workflow.info().workflow_id,
        tools=task.tools,
        expected_fingerprints=task.tool_fingerprints,
        system_prompt=task.system_prompt,
        output_schema=task.output_schema,
        validators=task.validators,
        guards=task.guards,
        channels=task.channels,
        mcp_servers=task.mcp_servers,
        resources=task.resources,
        inherited_resources=task.inherited_resources,
        scope=merge_scopes(task.scope),
        scope_schema=task.scope_schema,
        agents=[subagent_tool(a.name, a.description) for a in task.subagents],
        priced_provider=task.provider if priced else None,
        priced_model=task.model if priced else None,
        fallback_providers=[choice.provider for choice in task.fallback_providers],
        compactor=task.compaction.function if task.compaction and task.compaction.strategy == "function" else None,
    )
    retries = retry_policy(BOOKKEEPING, task.max_retries, TASK_FATAL_TOOL_ERRORS)
    summary = f"prepare: {len(task.tools)} tool(s)" + (
        f", tools of MCP server(s) {', '.join(sorted(task.mcp_servers))}" if task.mcp_servers else ""
    )
    try:
        # A short check of the worker's registry and a few content-store writes: a local activity.
        if patches.patched(PATCH_LEAN_STEPS):
            return await execute_local(PREPARE_TASK, inp, PrepareOutput, summary, retries)
        return await execute(
            PREPARE_TASK, inp, PrepareOutput, summary, BOOKKEEPING,
            start_to_close=BOOKKEEPING_SECONDS, retry=retries, heartbeat=None,
        )
    except ActivityError as err:
        if isinstance(err.cause, ApplicationError):
            raise typed_task_error(err.cause) from err
        raise


async def load_transcript(
    task: TaskInput, inp: LoadTranscriptInput, run: int, summary: str | None = None
) -> LoadTranscriptOutput:
    """Read back the stored transcript when a run resumes (``run``: the run's number, for the
    summary) or a fork starts (``summary`` says so)."""
    return await execute(
        LOAD_TRANSCRIPT, inp, LoadTranscriptOutput, summary or f"resume run {run}", BOOKKEEPING,
        start_to_close=BOOKKEEPING_SECONDS, retry=retry_policy(BOOKKEEPING, task.max_retries), heartbeat=None,
    )


def reports_to_server(turn: int, shape: int) -> bool:
    """Whether local model call ``turn`` is an ordinary activity instead: it ends the workflow task,
    so the markers before it reach the server (noeta.protocols.local_model_calls). ``shape``: the
    task's recorded shape (tasks of SHAPE_LOCAL_MODEL_CALLS_BY_DATA no longer ask PATCH_LOCAL_REPORTS)."""
    if turn % LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK == 0:
        return True
    if turn % EARLIER_LOCAL_MODEL_CALLS_PER_WORKFLOW_TASK != 0:
        return False
    return not patches.by_shape(PATCH_LOCAL_REPORTS, shape, SHAPE_LOCAL_MODEL_CALLS_BY_DATA)


async def call_model(task: TaskInput, request: CallModelInput, shape: int, *, ordinary: bool = False) -> CallModelOutput:
    """Make one model call with the task's ``model_activity`` options and provider retries, as a
    local activity for a task with ``model_local_activity`` (noeta.protocols.local_model_calls)
    unless ``ordinary`` (its workflow task must end: PATCH_LOCAL_RECOVERY); a call that failed for
    good raises its typed error, or AttemptsExhaustedError (see ``provider_failure``). ``shape``:
    the task's recorded shape (noeta.protocols.names)."""
    options, retries = task.model_activity, provider_retries(task)
    request = dataclasses.replace(request, budget=attempt_budget(task, options, retries))
    summary = f"{request.provider} {request.model or ''} · turn {request.turn}".replace("  ", " ")
    # The worker counts attempts (noeta.activities._attempts) and marks final errors.
    retry = retry_policy(options, retries, ledger=True)
    try:
        # The flag is in the task's input, but a worker of an earlier release ignored it (see the patch).
        local = task.model_local_activity and patches.by_shape(
            PATCH_LOCAL_MODEL_CALLS, shape, SHAPE_LOCAL_MODEL_CALLS_BY_DATA
        )
        if local and not ordinary and not reports_to_server(request.turn, shape):
            out = await execute_local_call(
                CALL_MODEL, request, CallModelOutput, local_model_attempt_seconds(options.start_to_close_seconds),
                retry, model_call_activity_id(ModelCallStart.of(request)), summary, options.schedule_to_close_seconds,
            )
        else:
            # After a lost workflow task this turn may have run locally already: it asks its record.
            request = dataclasses.replace(request, may_have_run=True) if local and ordinary else request
            out = await execute(
                CALL_MODEL, request, CallModelOutput, summary, options,
                start_to_close=options.start_to_close_seconds or task.model_timeout_seconds,
                retry=retry,
                heartbeat=options.heartbeat_seconds,
            )
    except ActivityError as err:
        raise_if_cancelled(err)
        raise provider_failure(err, provider_retries(task)) from err
    return out


async def invoke_tool(
    task: TaskInput, inp: InvokeToolInput, spec: ToolSpec | None, shape: int, approved_by: str | None = None
) -> InvokeToolOutput:
    """Run one tool call with the tool's own timeout, heartbeat and retries, else the task's
    (``tool_activity``, or ``mcp_activity`` for a remote MCP server's tool), as a local activity
    for a local tool (noeta.workflows.local_tools); raises ActivityError when the call failed for
    good, so the caller decides what the model sees. ``shape``: the task's recorded shape
    (noeta.protocols.names). ``approved_by``: the human who approved the call, named in its
    summary (a summary is not part of the command's identity: histories replay the same)."""
    options = task.mcp_activity if inp.mcp is not None else task.tool_activity
    retries = spec.max_retries if spec and spec.max_retries is not None else tool_retries(task)
    own_timeout = spec.start_to_close_seconds if spec else None
    own_heartbeat = spec.heartbeat_seconds if spec else None
    inp = dataclasses.replace(inp, budget=attempt_budget(task, options, retries))
    summary = f"{inp.tool_name}({short_arguments(inp.arguments)})"
    if approved_by is not None:
        summary = f"approved by {approved_by}: {summary}"
    # The worker counts attempts (noeta.activities._attempts) and marks final errors.
    retry = retry_policy(options, retries, TASK_FATAL_TOOL_ERRORS, ledger=True)
    if spec is not None and local_tools.runs_locally(task, spec, shape):
        return await local_tools.invoke_local(inp, spec, summary, retry)
    return await execute(
        INVOKE_TOOL, inp, InvokeToolOutput, summary, options,
        start_to_close=own_timeout or options.start_to_close_seconds or task.tool_timeout_seconds,
        retry=retry,
        heartbeat=own_heartbeat or options.heartbeat_seconds,
    )


async def check_guards(task: TaskInput, inp: CheckGuardsInput) -> CheckGuardsOutput:
    """Run the guards on the turn's actions (``guard_activity``, 60 s by default)."""
    options = task.guard_activity
    return await execute(
        CHECK_GUARDS, inp, CheckGuardsOutput, f"guards on {', '.join(a.call_id for a in inp.actions)}", options,
        start_to_close=options.start_to_close_seconds or GUARD_TIMEOUT_SECONDS,
        retry=retry_policy(options, task.max_retries),
        heartbeat=options.heartbeat_seconds,
    )


async def validate_output(task: TaskInput, inp: ValidateInput) -> ValidateOutput:
    """Check a final answer against the output schema and the validators (``validator_activity``).
    """
    options = task.validator_activity
    return await execute(
        VALIDATE_OUTPUT, inp, ValidateOutput, f"validate answer ({len(task.validators)} validator(s))", options,
        start_to_close=options.start_to_close_seconds or task.tool_timeout_seconds,
        retry=retry_policy(options, task.max_retries),
        heartbeat=options.heartbeat_seconds,
    )


async def run_subtask(child: TaskInput, child_id: str, summary: str) -> TaskResult:
    """A sub-agent as a child workflow; raises ChildWorkflowError when it did not complete."""
    # Children started before the built-in-policy workflow type existed were all WORKFLOW_NAME.
    kind = workflow_name_for(child.policy) if patches.patched(PATCH_BUILTIN_POLICY_CHILDREN) else WORKFLOW_NAME
    # A sub-agent belongs to its root task's tenant: it carries the same NoetaTenant, so that
    # tenant's task list and approvals inbox show it (a parent without one passes none on).
    tenant = workflow.info().typed_search_attributes.get(TENANT)
    result: TaskResult = await workflow.execute_child_workflow(
        kind, child, id=child_id, result_type=TaskResult, static_summary=summary[:200],
        search_attributes=TypedSearchAttributes([SearchAttributePair(TENANT, tenant)]) if tenant else None,
    )
    return result


async def release_resources(task: TaskInput, inp: ReleaseInput) -> ReleaseOutput | None:
    """The task ended (completed, failed or cancelled): destroy its task-scoped resources. A local
    activity: the worker that runs the workflow is the one that created them when it prepared the
    task. Failures are logged by the worker and recorded, never the task's outcome."""
    if not patches.patched(PATCH_TASK_RESOURCES):
        return None
    summary = f"release {', '.join(inp.keys)}"
    try:
        return await execute_local(RELEASE_RESOURCES, inp, ReleaseOutput, summary, retry_policy(BOOKKEEPING, task.max_retries))
    except ActivityError:
        return None
