"""A remote MCP tool call whose server asks the task's model (``sampling/createMessage``): the call
stops with the request, the task's guards judge it (a guard may deny it, or send it to a person),
a recorded model call of the task answers it (the task's provider and model, its budget, usage and
events), and the call is made again with the answers so far (noeta.protocols.sampling).

The model call is the task's own ``call_model`` activity with the server's messages as its whole
transcript: it joins no transcript of the task, and it is never a turn (``max_turns`` does not count
it), but its tokens and cost are the task's like any other call's.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

from noeta.protocols.activity_io import CallModelInput, InvokeToolInput
from noeta.protocols.messages import Message, TextBlock
from noeta.protocols.names import PATCH_MCP_SAMPLING
from noeta.protocols.sampling import (
    SAMPLING_REQUIRED,
    ProposedSampling,
    SampledAnswer,
    SamplingCall,
    message_text,
    request_text,
    sampling_id,
)
from noeta.workflows import patches, steps
from noeta.workflows.budget import Budget, count_model_call
from noeta.workflows.failures import stopped_for
from noeta.workflows.gates import Gate
from noeta.workflows.run import RunState
from noeta.workflows.status import RunStatus


def sampling_request(err: ActivityError) -> dict[str, Any] | None:
    """What the server asked the model, when the call stopped for it (None: it failed otherwise)."""
    return stopped_for(err, SAMPLING_REQUIRED)


class Sampler:
    """Answers MCP servers' sampling requests with the task's model, behind the task's guards and
    within its budget."""

    def __init__(self, run: RunState, gate: Gate, status: RunStatus, budget: Budget | None) -> None:
        """Model calls are counted in ``run``'s usage and against ``budget`` (None: no limits);
        ``gate`` shows each request to the task's guards."""
        self._run = run
        self._gate = gate
        self._status = status
        self._budget = budget

    async def answer(self, inp: InvokeToolInput, asked: dict[str, Any], index: int) -> SampledAnswer:
        """The answer to the ``index``-th (from 1) sampling request of tool call ``inp``."""
        # Only tasks whose server samples record this marker (and take this path).
        patches.patched(PATCH_MCP_SAMPLING)
        server = str(asked.get("server") or (inp.mcp.alias if inp.mcp else ""))
        call_id = sampling_id(inp.call_id, index)
        system = asked.get("systemPrompt") if isinstance(asked.get("systemPrompt"), str) else None
        requested = asked.get("maxTokens") if isinstance(asked.get("maxTokens"), int) else None
        refusal = await self._gate.check(
            ProposedSampling(call_id, inp.call_id, inp.tool_name, server, request_text(asked), system, requested)
        )
        if refusal is not None:
            return SampledAnswer(refused=refusal)
        task, state, budget = self._run.task, self._run.state, self._budget
        max_tokens = requested if task.max_tokens is None or requested is None else min(requested, task.max_tokens)
        if budget is not None:
            budget.check(model_calls=1)
            max_tokens = budget.max_tokens(max_tokens)
        temperature = asked.get("temperature")
        request = CallModelInput(
            task_id=workflow.info().workflow_id,
            provider=task.provider,
            model=task.model,
            head=None,
            append=_messages(asked),
            system_ref=None,
            tools=[],
            turn=state.total_turns,
            temperature=float(temperature) if isinstance(temperature, (int, float)) else task.temperature,
            max_tokens=max_tokens,
            step_key=f"{inp.idempotency_key or steps.step_key(inp.call_id)}/sample-{index}",
            sampling=SamplingCall(call_id, inp.call_id, server, system),
        )
        # An ordinary activity: it is not one of the turns model_local_activity counts.
        out = await steps.call_model(task, request, state.shape, ordinary=True)
        state.usage = state.usage + out.response.usage
        count_model_call(state)
        self._status.update_index()
        if budget is not None:
            budget.warn()
        text = "".join(b.text for b in out.response.content if isinstance(b, TextBlock))
        return SampledAnswer(text, out.model or task.model or task.provider, out.response.stop_reason)


def _messages(asked: dict[str, Any]) -> list[Message]:
    """The server's messages as the model's transcript (text; other content is named, not sent)."""
    messages = []
    for message in asked.get("messages") or []:
        if isinstance(message, dict):
            messages.append(Message(role="assistant" if message.get("role") == "assistant" else "user", content=[TextBlock(text=message_text(message.get("content")))]))
    return messages


__all__ = ["Sampler", "sampling_request"]
