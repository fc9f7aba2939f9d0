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
from temporalio.exceptions import ActivityError

from noeta.protocols.activity_io import InvokeToolInput, InvokeToolOutput
from noeta.protocols.elicitation import (
    INPUT_REQUIRED,
    MAX_ELICITATIONS_PER_CALL,
    ElicitationAnswer,
    ElicitationRequest,
    answer_of,
    elicitation_id,
)
from noeta.protocols.login_wait import MAX_LOGINS_PER_CALL
from noeta.protocols.names import PATCH_MCP_ELICITATION
from noeta.protocols.sampling import MAX_SAMPLES_PER_CALL, SampledAnswer
from noeta.protocols.task import ApprovalRequest, TaskInput
from noeta.protocols.tool import ToolSpec
from noeta.workflows import patches, steps
from noeta.workflows.failures import stopped_for
from noeta.workflows.gates import Gate
from noeta.workflows.login_wait import await_login, login_needed
from noeta.workflows.sampling import Sampler, sampling_request


def question(err: ActivityError) -> dict[str, Any] | None:
    """What the server asked, when the call stopped to ask a person (None: it failed otherwise)."""
    return stopped_for(err, INPUT_REQUIRED)


async def invoke_answering(
    gate: Gate, task: TaskInput, inp: InvokeToolInput, spec: ToolSpec | None, shape: int, approved_by: str | None,
    sampler: Sampler | None = None,
) -> InvokeToolOutput:
    """``steps.invoke_tool``, made again after each question its server asks, with a person's
    answers, and after each sampling request, with ``sampler``'s (the task model's: None, the call
    fails with the request), and after each new login of the operator's that a call waited for
    (noeta.workflows.login_wait); raises ActivityError as it does (a server that asks more than
    MAX_ELICITATIONS_PER_CALL questions, or MAX_SAMPLES_PER_CALL samples, fails the call with its
    last stop)."""
    answers: list[ElicitationAnswer] = []
    sampled: list[SampledAnswer] = []
    logins = 0
    while True:
        try:
            return await steps.invoke_tool(task, inp, spec, shape, approved_by=approved_by)
        except ActivityError as err:
            wanted = sampling_request(err)
            if wanted is not None and sampler is not None and len(sampled) < MAX_SAMPLES_PER_CALL:
                sampled.append(await sampler.answer(inp, wanted, len(sampled) + 1))
                inp = dataclasses.replace(inp, sampled=list(sampled))
                continue
            needed = login_needed(err)
            if needed is not None and logins < MAX_LOGINS_PER_CALL:
                logins += 1
                if await await_login(gate, task, inp, needed, logins):
                    continue  # logged in again: the worker reads the new tokens from the store
                raise
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
