"""A remote MCP tool call whose server asks a person (``elicitation/create``): the worker holds the
server's request open for a grace period (``elicitation_hold_seconds``, noeta.workflows.held_questions)
and an answer within it completes the call on that request; otherwise the call stops with the
question, the task waits for the answer durably like an approval, and the call is made again with
the answers so far (noeta.protocols.elicitation says why it is made again rather than kept open
for days; docs/mcp.md what a server sees).

The wait is the approvals' own (:meth:`Gate.await_answer`): listed with the pending approvals,
answered with ``approve`` (accept, the content as ``arguments``) or ``refuse`` (decline; reason
``cancel``: cancel), refused by its timeout (a decline), the answerer recorded from the update's
caller identity.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from temporalio.exceptions import ActivityError

from noeta.protocols.activity_io import InvokeToolInput, InvokeToolOutput
from noeta.protocols.elicitation import (
    INPUT_REQUIRED,
    MAX_ELICITATIONS_PER_CALL,
    ElicitationAnswer,
    ElicitationRequest,
    answer_of,
)
from noeta.protocols.held_questions import elicitation_request
from noeta.protocols.login_wait import MAX_LOGINS_PER_CALL
from noeta.protocols.names import PATCH_MCP_ELICITATION
from noeta.protocols.sampling import MAX_SAMPLES_PER_CALL, SampledAnswer
from noeta.protocols.task import TaskInput
from noeta.protocols.tool import ToolSpec
from noeta.workflows import patches, steps
from noeta.workflows.failures import stopped_for
from noeta.workflows.approvals import waiting_request
from noeta.workflows.gates import Gate
from noeta.workflows.held_questions import remaining_seconds
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
    last stop). A question answered while the worker held the server's request open
    (noeta.workflows.held_questions) needs no new call."""
    hold = min(task.elicitation_hold_seconds, task.approval_timeout_seconds) if inp.mcp is not None else 0.0
    if hold:  # the activity's input only: no command changes
        inp = dataclasses.replace(inp, elicitation_hold_seconds=hold)
    try:
        out = await _answering(gate, task, inp, spec, shape, approved_by, sampler, hold > 0)
    except ActivityError:
        gate.held.ended(inp.call_id)
        raise
    gate.held.ended(inp.call_id)
    return out


async def _answering(
    gate: Gate, task: TaskInput, inp: InvokeToolInput, spec: ToolSpec | None, shape: int, approved_by: str | None,
    sampler: Sampler | None, holding: bool,
) -> InvokeToolOutput:
    answers: list[ElicitationAnswer] = []
    sampled: list[SampledAnswer] = []
    logins = 0
    while True:
        if holding:
            gate.held.flying(inp.call_id, len(answers))
        try:
            return await steps.invoke_tool(task, inp, spec, shape, approved_by=approved_by)
        except ActivityError as err:
            gate.held.landed(inp.call_id)
            if gate.held.absorb(inp.call_id, answers):  # answered on the held request before this stop
                inp = dataclasses.replace(inp, elicitation_answers=list(answers))
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
    held = gate.held.take(inp.call_id, index)
    if held is not None:  # listed while the call held the server's request: the same wait goes on
        request = held
        decision = await gate.await_answer(request, remaining_seconds(request))
    else:
        action = elicitation_request(inp.call_id, inp.tool_name, index, asked, inp.mcp.alias if inp.mcp else "")
        request = waiting_request(action, action.message, f"mcp:{action.server}", task.approval_timeout_seconds)
        decision = await gate.await_answer(request)
    schema = request.action.requested_schema if isinstance(request.action, ElicitationRequest) else {}
    return answer_of(decision.approved, decision.reason, decision.arguments, schema)


__all__ = ["invoke_answering", "question"]
