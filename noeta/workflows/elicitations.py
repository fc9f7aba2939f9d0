"""A remote MCP tool call whose server asks a person (``elicitation/create``): the call stops with
the question, the task waits for the answer durably like an approval, and the call is made again
with the answers so far (noeta.protocols.elicitation says why it is made again rather than kept
open; docs/mcp.md what a server sees).

The wait is the approvals' own (:meth:`Gate.await_answer`): listed with the pending approvals,
answered with ``approve`` (accept, the content as ``arguments``) or ``refuse`` (decline; reason
``cancel``: cancel), refused by its timeout (a decline), the answerer recorded from the update's
caller identity.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from noeta.protocols.activity_io import InvokeToolInput, InvokeToolOutput
from noeta.protocols.elicitation import (
    INPUT_REQUIRED,
    MAX_ELICITATIONS_PER_CALL,
    ElicitationAnswer,
    ElicitationRequest,
    answer_of,
    elicitation_id,
)
from noeta.protocols.names import PATCH_MCP_ELICITATION
from noeta.protocols.task import ApprovalRequest, TaskInput
from noeta.protocols.tool import ToolSpec
from noeta.workflows import patches, steps
from noeta.workflows.gates import Gate


def question(err: ActivityError) -> dict[str, Any] | None:
    """What the server asked, when the call stopped to ask a person (None: it failed otherwise)."""
    cause = err.cause
    if not isinstance(cause, ApplicationError) or cause.type != INPUT_REQUIRED or not cause.details:
        return None
    details = cause.details[0]
    request = details.get("request") if isinstance(details, dict) else None
    return request if isinstance(request, dict) else None


async def invoke_answering(
    gate: Gate, task: TaskInput, inp: InvokeToolInput, spec: ToolSpec | None, shape: int, approved_by: str | None
) -> InvokeToolOutput:
    """``steps.invoke_tool``, made again after each question its server asks, with a person's
    answers; raises ActivityError as it does (a server that asks more than
    MAX_ELICITATIONS_PER_CALL questions fails the call with its last stop)."""
    answers: list[ElicitationAnswer] = []
    while True:
        try:
            return await steps.invoke_tool(task, inp, spec, shape, approved_by=approved_by)
        except ActivityError as err:
            asked = question(err)
            if asked is None or len(answers) >= MAX_ELICITATIONS_PER_CALL:
                raise
            # Only tasks whose server asks a person record this marker (and take this path).
            patches.patched(PATCH_MCP_ELICITATION)
            answers.append(await _ask(gate, task, inp, asked, len(answers) + 1))
            inp = dataclasses.replace(inp, elicitation_answers=list(answers))


async def _ask(gate: Gate, task: TaskInput, inp: InvokeToolInput, asked: dict[str, Any], index: int) -> ElicitationAnswer:
    schema = asked.get("requested_schema") if isinstance(asked.get("requested_schema"), dict) else {}
    action = ElicitationRequest(
        call_id=elicitation_id(inp.call_id, index),
        tool_call_id=inp.call_id,
        tool_name=inp.tool_name,
        server=str(asked.get("server") or (inp.mcp.alias if inp.mcp else "")),
        message=str(asked.get("message") or ""),
        requested_schema=dict(schema or {}),
    )
    now = workflow.now()
    deadline = now + timedelta(seconds=task.approval_timeout_seconds)
    request = ApprovalRequest(
        action.call_id, action, action.message, f"mcp:{action.server}",
        waiting_since=now.isoformat(), deadline=deadline.isoformat(),
    )
    decision = await gate.await_answer(request)
    return answer_of(decision.approved, decision.reason, decision.arguments, action.requested_schema)


__all__ = ["invoke_answering", "question"]
