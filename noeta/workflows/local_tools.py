"""A tool call as a local activity (tools declared ``local=True``, and every tool of an MCP server
configured ``local``): the same invoke_tool activity and input, run on the worker that runs the
workflow and recorded as one marker, with the tool's own retries counted by that worker's
attempt ledger (noeta.activities._attempts) as for any tool."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

from noeta.protocols.activity_io import InvokeToolInput, InvokeToolOutput
from noeta.protocols.local_tools import local_attempt_seconds
from noeta.protocols.names import INVOKE_TOOL, PATCH_LOCAL_TOOLS
from noeta.protocols.task import TaskInput
from noeta.protocols.tool import ToolSpec
from noeta.workflows import patches


def runs_locally(task: TaskInput, spec: ToolSpec | None) -> bool:
    """Whether this call of ``spec`` runs as a local activity: the tool (or its MCP server) says
    so, and the task is past PATCH_LOCAL_TOOLS (tasks recorded before it ran every tool as an
    activity; the patch is asked only here, so tasks without local tools never record it)."""
    if spec is None:
        return False
    server = task.mcp_servers.get(spec.mcp_server) if spec.mcp_server is not None else None
    wanted = spec.local or (server is not None and server.local)
    return wanted and patches.patched(PATCH_LOCAL_TOOLS)


def local_activity_id(inp: InvokeToolInput) -> str:
    """The marker's activity id: the call's number in this run (the tail of its idempotency key)
    and its call id, which the event log reads back (noeta.client.projection.local_tools)."""
    return f"{inp.idempotency_key.rsplit('/', 1)[-1]}/{inp.call_id}"


async def invoke_local(inp: InvokeToolInput, spec: ToolSpec, summary: str, retry: RetryPolicy) -> InvokeToolOutput:
    """Run ``inp`` as a local activity with the tool's bounded timeout and ``retry``; a call that
    failed for good raises ActivityError, as an ordinary tool call's does."""
    activity_id = local_activity_id(inp)
    try:
        out: InvokeToolOutput = await workflow.execute_local_activity(
            INVOKE_TOOL,
            inp,
            result_type=InvokeToolOutput,
            start_to_close_timeout=timedelta(seconds=local_attempt_seconds(spec.start_to_close_seconds)),
            retry_policy=retry,
            activity_id=activity_id,
            summary=summary,
        )
    except ActivityError:
        raise
    except FailureError as err:  # a local activity's failure reaches the workflow unwrapped
        raise ActivityError(
            "local activity failed", scheduled_event_id=0, started_event_id=0, identity="",
            activity_type=INVOKE_TOOL, activity_id=activity_id, retry_state=None,
        ) from err
    return out
