"""A remote MCP tool call that stopped because a user's login lacks a scope the call needs: the
task waits durably, like an approval, until the operator has logged in again (``noeta mcp login``
with the scope, then ``approve``), and the call is made again (noeta.protocols.login_wait says why;
docs/mcp.md what an operator does). A refusal, or no answer within the task's approval timeout,
fails the call with the stop's own McpLoginRequiredError.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ActivityError

from noeta.protocols.activity_io import InvokeToolInput
from noeta.protocols.login_wait import LOGIN_REQUIRED, LoginRequest, login_wait_id
from noeta.protocols.names import PATCH_MCP_LOGIN_WAIT
from noeta.protocols.task import TaskInput
from noeta.workflows import patches
from noeta.workflows.failures import stopped_for
from noeta.workflows.approvals import waiting_request
from noeta.workflows.gates import Gate


def login_needed(err: ActivityError) -> dict[str, Any] | None:
    """What the new login needs, when the call stopped for one (None: it failed otherwise)."""
    return stopped_for(err, LOGIN_REQUIRED)


async def await_login(gate: Gate, task: TaskInput, inp: InvokeToolInput, needed: dict[str, Any], index: int) -> bool:
    """Wait for the operator to log in again: True once they said so (make the call again), False
    when refused or timed out (the call fails)."""
    # Only tasks whose call stopped for a login record this marker (and take this path).
    patches.patched(PATCH_MCP_LOGIN_WAIT)
    server = str(needed.get("server") or (inp.mcp.alias if inp.mcp else ""))
    command = str(needed.get("command") or "")
    action = LoginRequest(
        call_id=login_wait_id(inp.call_id, index),
        tool_call_id=inp.call_id,
        tool_name=inp.tool_name,
        server=server,
        url=str(needed.get("url") or ""),
        scope=str(needed.get("scope") or ""),
        command=command,
        message=f"MCP server {server} needs a new login with scope '{needed.get('scope') or ''}': run `{command}`, then approve",
    )
    request = waiting_request(action, action.message, f"mcp:{server}", task.approval_timeout_seconds)
    return (await gate.await_answer(request)).approved


__all__ = ["await_login", "login_needed"]
