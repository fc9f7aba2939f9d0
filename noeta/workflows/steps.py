"""One typed function per step the workflow schedules: each builds the activity's options from
the task and returns the activity's typed output (or raises the task's typed error)."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from noeta.protocols.names import (
    CALL_MODEL,
    CHECK_GUARDS,
    INVOKE_TOOL,
    LOAD_TRANSCRIPT,
    PATCH_BUILTIN_POLICY_CHILDREN,
    PATCH_LEAN_STEPS,
    PATCH_TASK_RESOURCES,
    PREPARE_TASK,
    RELEASE_RESOURCES,
    VALIDATE_OUTPUT,
    WORKFLOW_NAME,
    workflow_name_for,
)
from noeta.protocols.scope import merge_scopes
from noeta.protocols.task import (
    DEFAULT_HEARTBEAT_SECONDS,
    TASK_FATAL_TOOL_ERRORS,
    AttemptBudget,
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
    TaskInput,
    TaskResult,
    ValidateInput,
    ValidateOutput,
    attempts_cap,
    subagent_tool,
)
from noeta.protocols.tool import ToolSpec
from noeta.workflows import patches
from noeta.workflows.failures import provider_failure, raise_if_cancelled, typed_task_error

#: Steps that only touch the worker's registry and content store.
BOOKKEEPING_TIMEOUT = timedelta(seconds=60)
#: Activities heartbeat while they run: a dead worker's step is retried elsewhere after this.
HEARTBEAT_TIMEOUT = timedelta(seconds=DEFAULT_HEARTBEAT_SECONDS)
#: Longest backoff before retrying an attempt whose worker was lost.
LOST_ATTEMPT_MAX_BACKOFF = timedelta(seconds=10)


def retry_policy(max_retries: int, non_retryable: tuple[str, ...] = ()) -> RetryPolicy:
    """``max_retries`` retries after the first attempt, exponential backoff from 1 s."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=max_retries + 1,
        non_retryable_error_types=list(non_retryable),
    )


def ledger_retry_policy(max_retries: int, non_retryable: tuple[str, ...] = ()) -> RetryPolicy:
    """For calls whose worker counts attempts itself (an AttemptBudget in their input): Temporal's
    count is only a safety net, and the worker sets the delay after every failure it records. What
    is left to this policy are lost attempts (a killed worker): retried after 1, 2, 4, 8, then 10 s,
    since another worker is usually there to take the call."""
    return dataclasses.replace(
        retry_policy(max_retries, non_retryable),
        maximum_attempts=attempts_cap(max_retries),
        maximum_interval=LOST_ATTEMPT_MAX_BACKOFF,
    )


def step_key(name: str) -> str:
    """The key of one logical step of this run: unique per run, the same on every replay and
    attempt (the worker records finished steps under it; tools get it as their idempotency key)."""
    info = workflow.info()
    return f"{info.workflow_id}/{info.run_id}/{name}"


def short_arguments(arguments: dict[str, Any], limit: int = 80) -> str:
    text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def provider_retries(task: TaskInput) -> int:
    """Retries of a model call: ``provider_retries``, else ``max_retries`` (validation's)."""
    return task.max_retries if task.provider_retries is None else task.provider_retries


def tool_retries(task: TaskInput) -> int:
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
    )
    retries = retry_policy(task.max_retries, TASK_FATAL_TOOL_ERRORS)
    summary = f"prepare: {len(task.tools)} tool(s)" + (
        f", tools of MCP server(s) {', '.join(sorted(task.mcp_servers))}" if task.mcp_servers else ""
    )
    try:
        # A short check of the worker's registry and a few content-store writes: as a local
        # activity it saves a round trip through the server and five history events per task.
        plan: PrepareOutput
        if patches.patched(PATCH_LEAN_STEPS):
            plan = await workflow.execute_local_activity(
                PREPARE_TASK, inp, result_type=PrepareOutput, start_to_close_timeout=BOOKKEEPING_TIMEOUT,
                retry_policy=retries, summary=summary,
            )
        else:
            plan = await workflow.execute_activity(
                PREPARE_TASK, inp, result_type=PrepareOutput, start_to_close_timeout=BOOKKEEPING_TIMEOUT,
                retry_policy=retries, summary=summary,
            )
        return plan
    except ActivityError as err:
        if isinstance(err.cause, ApplicationError):
            raise typed_task_error(err.cause) from err
        raise


async def load_transcript(task: TaskInput, inp: LoadTranscriptInput, run: int) -> LoadTranscriptOutput:
    out: LoadTranscriptOutput = await workflow.execute_activity(
        LOAD_TRANSCRIPT,
        inp,
        result_type=LoadTranscriptOutput,
        start_to_close_timeout=BOOKKEEPING_TIMEOUT,
        retry_policy=retry_policy(task.max_retries),
        summary=f"resume run {run}",
    )
    return out


async def call_model(task: TaskInput, request: CallModelInput) -> CallModelOutput:
    request = dataclasses.replace(request, budget=AttemptBudget(provider_retries(task), task.rate_limit_wait_seconds))
    try:
        out: CallModelOutput = await workflow.execute_activity(
            CALL_MODEL,
            request,
            result_type=CallModelOutput,
            start_to_close_timeout=timedelta(seconds=task.model_timeout_seconds),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            # The worker counts attempts (noeta.activities._attempts) and marks final errors.
            retry_policy=ledger_retry_policy(provider_retries(task)),
            summary=f"{task.provider} {task.model or ''} · turn {request.turn}".replace("  ", " "),
        )
    except ActivityError as err:
        raise_if_cancelled(err)
        raise provider_failure(err, provider_retries(task)) from err
    return out


async def invoke_tool(task: TaskInput, inp: InvokeToolInput, spec: ToolSpec | None) -> InvokeToolOutput:
    """Run one tool call with the tool's own timeout and retries (else the task's); raises
    ActivityError when the call failed for good, so the caller decides what the model sees."""
    retries = spec.max_retries if spec and spec.max_retries is not None else tool_retries(task)
    timeout = spec.start_to_close_seconds if spec and spec.start_to_close_seconds else task.tool_timeout_seconds
    heartbeat = spec.heartbeat_seconds if spec and spec.heartbeat_seconds else DEFAULT_HEARTBEAT_SECONDS
    inp = dataclasses.replace(inp, budget=AttemptBudget(retries, task.rate_limit_wait_seconds))
    out: InvokeToolOutput = await workflow.execute_activity(
        INVOKE_TOOL,
        inp,
        result_type=InvokeToolOutput,
        start_to_close_timeout=timedelta(seconds=timeout),
        heartbeat_timeout=timedelta(seconds=heartbeat),
        # The worker counts attempts (noeta.activities._attempts) and marks final errors.
        retry_policy=ledger_retry_policy(retries, TASK_FATAL_TOOL_ERRORS),
        summary=f"{inp.tool_name}({short_arguments(inp.arguments)})",
    )
    return out


async def check_guards(task: TaskInput, inp: CheckGuardsInput) -> CheckGuardsOutput:
    out: CheckGuardsOutput = await workflow.execute_activity(
        CHECK_GUARDS,
        inp,
        result_type=CheckGuardsOutput,
        start_to_close_timeout=BOOKKEEPING_TIMEOUT,
        heartbeat_timeout=HEARTBEAT_TIMEOUT,
        retry_policy=retry_policy(task.max_retries),
        summary=f"guards on {', '.join(a.call_id for a in inp.actions)}",
    )
    return out


async def validate_output(task: TaskInput, inp: ValidateInput) -> ValidateOutput:
    out: ValidateOutput = await workflow.execute_activity(
        VALIDATE_OUTPUT,
        inp,
        result_type=ValidateOutput,
        start_to_close_timeout=timedelta(seconds=task.tool_timeout_seconds),
        heartbeat_timeout=HEARTBEAT_TIMEOUT,
        retry_policy=retry_policy(task.max_retries),
        summary=f"validate answer ({len(task.validators)} validator(s))",
    )
    return out


async def run_subtask(child: TaskInput, child_id: str, summary: str) -> TaskResult:
    """A sub-agent as a child workflow; raises ChildWorkflowError when it did not complete."""
    # Children started before the built-in-policy workflow type existed were all WORKFLOW_NAME.
    kind = workflow_name_for(child.policy) if patches.patched(PATCH_BUILTIN_POLICY_CHILDREN) else WORKFLOW_NAME
    result: TaskResult = await workflow.execute_child_workflow(
        kind, child, id=child_id, result_type=TaskResult, static_summary=summary[:200]
    )
    return result


async def release_resources(task: TaskInput, inp: ReleaseInput) -> ReleaseOutput | None:
    """The task ended (completed, failed or cancelled): destroy its task-scoped resources. A local
    activity: the worker that runs the workflow is the one that created them when it prepared the
    task. Failures are logged by the worker and recorded, never the task's outcome."""
    if not patches.patched(PATCH_TASK_RESOURCES):
        return None
    try:
        released: ReleaseOutput = await workflow.execute_local_activity(
            RELEASE_RESOURCES, inp, result_type=ReleaseOutput, start_to_close_timeout=BOOKKEEPING_TIMEOUT,
            retry_policy=retry_policy(task.max_retries), summary=f"release {', '.join(inp.keys)}",
        )
    except ActivityError:
        return None
    return released
