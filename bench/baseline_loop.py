"""The floor: the same agent loop written directly on Temporal, without any framework.

Per step one "model" activity (a tool call while fewer than ``steps`` tools have run, then a final
answer) and one "tool" activity returning the same number of bytes as Noeta's tool. The model
decides by step count, so this loop carries no transcript at all: everything Noeta does beyond
that (transcript, content store, events, search attributes) is what the comparison measures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from workload import final_answer, tool_output

WORKFLOW_NAME = "BenchBaselineLoop"

# The same retry shape and timeouts as Noeta's defaults (max_retries=3, 300 s per attempt).
RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=4,
)
ATTEMPT_TIMEOUT = timedelta(seconds=300)


@dataclass(frozen=True)
class LoopInput:
    steps: int
    output_bytes: int


@dataclass(frozen=True)
class ModelInput:
    task_id: str
    steps: int
    done: int
    output_bytes: int


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    arguments: dict[str, int]


@dataclass(frozen=True)
class ModelReply:
    tool_call: ToolCall | None = None
    text: str | None = None


@dataclass(frozen=True)
class ToolInput:
    task_id: str
    call: ToolCall


@dataclass(frozen=True)
class LoopResult:
    answer: str
    steps: int


@activity.defn(name="bench.model")
async def model(inp: ModelInput) -> ModelReply:
    if inp.done < inp.steps:
        return ModelReply(tool_call=ToolCall(f"call-{inp.done}", {"bytes": inp.output_bytes, "step": inp.done}))
    return ModelReply(text=final_answer(inp.done))


@activity.defn(name="bench.tool")
async def tool(inp: ToolInput) -> str:
    return tool_output(f"{inp.task_id}/{inp.call.call_id}", inp.call.arguments["bytes"])


@workflow.defn(name=WORKFLOW_NAME)
class BaselineLoop:
    @workflow.run
    async def run(self, inp: LoopInput) -> LoopResult:
        task_id = workflow.info().workflow_id
        done = 0
        while True:
            reply = await workflow.execute_activity(
                model, ModelInput(task_id, inp.steps, done, inp.output_bytes),
                start_to_close_timeout=ATTEMPT_TIMEOUT, retry_policy=RETRY,
            )
            if reply.tool_call is None:
                return LoopResult(answer=reply.text or "", steps=done)
            await workflow.execute_activity(
                tool, ToolInput(task_id, reply.tool_call), start_to_close_timeout=ATTEMPT_TIMEOUT, retry_policy=RETRY
            )
            done += 1
