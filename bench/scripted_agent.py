"""Noeta's side of the workload: a deterministic scripted provider and one tool.

The provider decides from the request alone: a tool call while the transcript holds fewer tool
results than the goal asks for, then a final answer. No shared script position, so any number of
agents can run at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workload import PROVIDER_NAME, TOOL_NAME, final_answer, parse_goal, tool_output

from noeta.builtins.llm_policy import LLMPolicy
from noeta.protocols.decisions import Decision
from noeta.protocols.messages import LLMRequest, LLMResponse, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from noeta.protocols.step_context import StepContext
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.protocols.view import View
from noeta.sdk import tool


class ScriptedProvider:
    """An LLMProvider answering by the number of tool results in the transcript."""

    name = PROVIDER_NAME

    async def complete(self, request: LLMRequest) -> LLMResponse:
        shape = next(
            (parsed for m in request.messages if m.role == "user" and (parsed := parse_goal(m.text))), None
        )
        if shape is None:
            raise ValueError("the request carries no bench goal")
        steps, output_bytes = shape
        done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResultBlock))
        if done < steps:
            call = ToolUseBlock(call_id=f"call-{done}", tool_name=TOOL_NAME, arguments={"bytes": output_bytes, "step": done})
            return LLMResponse(stop_reason="tool_use", content=[call], usage=Usage(uncached=100, output=10))
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text=final_answer(done))], usage=Usage(output=5))


_SCHEMA = {
    "type": "object",
    "properties": {"bytes": {"type": "integer"}, "step": {"type": "integer"}},
    "required": ["bytes"],
}


async def _output(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=tool_output(f"{ctx.task_id}/{ctx.call_id}", int(arguments["bytes"])))


bench_output = tool(_output, name=TOOL_NAME, version="1", input_schema=_SCHEMA,
                    description="Return the requested number of bytes of text.")
#: The same tool (same identity) declared local: the bench's "noeta-local" system.
bench_output_local = tool(_output, name=TOOL_NAME, version="1", input_schema=_SCHEMA,
                          description="Return the requested number of bytes of text.", local=True)


@dataclass(frozen=True)
class OwnPolicy:
    """The built-in policy's decisions from a policy of the task's own: such a task runs as
    AgentWorkflow, in the workflow sandbox (bench --with-sandbox-variants)."""

    def decide(self, ctx: StepContext, view: View) -> Decision:
        return LLMPolicy().decide(ctx, view)
