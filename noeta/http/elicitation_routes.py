"""``POST /tasks/{task_id}/elicitations``: answer a question an MCP server asked during a tool call
(a pending approval of kind ``elicitation``, docs/mcp.md): accept with content, decline or cancel.

The content is checked against the schema the server sent (422 naming the field), then sent as the
task's ``approve`` update (accept: the content as its arguments) or ``refuse`` (decline; cancel is
a refusal whose reason is ``cancel``), so the answerer recorded is the API key's name, as for
approvals, and the workflow checks the content again."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import StrictStr

from noeta.errors import ApprovalNotPendingError, ConfigurationError
from noeta.http.bodies import BoundedRoute
from noeta.http.models import ApprovalAccepted, Request
from noeta.http.openapi import AUTHENTICATED, answers
from noeta.http.routes import State, TaskId
from noeta.http.task_paths import TASK_PATH
from noeta.http.tenancy import Approver, identity, own_task
from noeta.protocols.elicitation import CANCEL_REASON, ElicitationRequest, content_problem, with_defaults

elicitations = APIRouter(dependencies=AUTHENTICATED, route_class=BoundedRoute)


class ElicitationAnswerIn(Request):
    """A person's answer to an MCP server's question: ``accept`` with ``content`` (an object
    matching the question's ``requested_schema``; properties with a default may be left out),
    ``decline`` or ``cancel``."""
    call_id: StrictStr
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


@elicitations.post(
    f"{TASK_PATH}/elicitations", status_code=202, tags=["approvals"],
    summary="Answer an MCP server's question (accept with content, decline, cancel)",
    responses=answers(401, 404, 409, 413, 422),
)
async def answer_elicitation(task_id: TaskId, body: ElicitationAnswerIn, state: State, who: Approver) -> ApprovalAccepted:
    """Answer the task's pending question ``call_id`` (``elicit:...``); the answerer recorded is the
    API key's name."""
    await own_task(state.client, who, task_id)
    pending = {r.call_id: r for r in await state.client.pending_approvals(task_id)}
    request = pending.get(body.call_id)
    if request is None or not isinstance(request.action, ElicitationRequest):
        raise ApprovalNotPendingError(f"no question {body.call_id!r} of an MCP server is waiting for an answer")
    if body.action != "accept" and body.content is not None:
        raise ConfigurationError("content comes only with action 'accept'")
    schema = request.action.requested_schema
    if body.action == "accept":
        problem = content_problem(schema, with_defaults(schema, body.content or {}))
        if problem is not None:
            raise ConfigurationError(f"content does not match the requested schema: {problem}")
    approved = body.action == "accept"
    reason = CANCEL_REASON if body.action == "cancel" else None
    arguments = (body.content or {}) if approved else None
    await state.client.approve(task_id, body.call_id, approved, reason, identity(who), arguments=arguments)
    return ApprovalAccepted(task_id=task_id, call_id=body.call_id, approved=approved)


__all__ = ["ElicitationAnswerIn", "elicitations"]
