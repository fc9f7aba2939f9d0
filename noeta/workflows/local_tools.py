"""A tool call as a local activity (tools declared ``local=True``, and every tool of an MCP server
configured ``local``): the same invoke_tool activity and input, run on the worker that runs the
workflow and recorded as one marker, with the tool's own retries counted by that worker's
attempt ledger (noeta.activities._attempts) as for any tool."""

from __future__ import annotations

from temporalio.common import RetryPolicy

from noeta.protocols.activity_io import InvokeToolInput, InvokeToolOutput
from noeta.protocols.local_tools import local_attempt_seconds
from noeta.protocols.names import INVOKE_TOOL, PATCH_LOCAL_TOOLS, SHAPE_LOCAL_TOOLS_BY_DATA
from noeta.protocols.task import TaskInput
from noeta.protocols.tool import ToolSpec
from noeta.workflows import patches
from noeta.workflows.local_calls import execute_local_call


def runs_locally(task: TaskInput, spec: ToolSpec | None, shape: int) -> bool:
    """Whether this call of ``spec`` runs as a local activity: the tool (or its MCP server) says
    so. Both flags are recorded data, not the worker's registry: ``spec`` is prepare_task's
    recorded result (or a continued run's carry, its input), the server is in the task's input,
    and no history from before local tools holds either. So only tasks prepared before
    SHAPE_LOCAL_TOOLS_BY_DATA (``shape``: the task's recorded shape) take the path by
    PATCH_LOCAL_TOOLS (:func:`noeta.workflows.patches.by_shape`)."""
    if spec is None:
        return False
    server = task.mcp_servers.get(spec.mcp_server) if spec.mcp_server is not None else None
    wanted = spec.local or (server is not None and server.local)
    return wanted and patches.by_shape(PATCH_LOCAL_TOOLS, shape, SHAPE_LOCAL_TOOLS_BY_DATA)


def local_activity_id(inp: InvokeToolInput) -> str:
    """The marker's activity id: the call's number in this run (the tail of its idempotency key)
    and its call id, which the event log reads back (noeta.client.projection.local_tools)."""
    return f"{inp.idempotency_key.rsplit('/', 1)[-1]}/{inp.call_id}"


async def invoke_local(inp: InvokeToolInput, spec: ToolSpec, summary: str, retry: RetryPolicy) -> InvokeToolOutput:
    """Run ``inp`` as a local activity with the tool's bounded timeout and ``retry``; a call that
    failed for good raises ActivityError, as an ordinary tool call's does."""
    return await execute_local_call(
        INVOKE_TOOL, inp, InvokeToolOutput, local_attempt_seconds(spec.start_to_close_seconds), retry,
        local_activity_id(inp), summary,
    )
