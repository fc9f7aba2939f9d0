"""The floor: the same agent loop written directly on Temporal, without any framework.

Per step one "model" activity (a tool call while fewer than ``steps`` tools have run, then a final
answer) and one "tool" activity returning the same number of bytes as Noeta's tool. The model
decides by step count, so this loop carries no transcript at all: everything Noeta does beyond
that (transcript, content store, events, search attributes) is what the comparison measures.
With ``model_reads_results`` each model call also gets the previous tool call's output, the least
any agent loop carries (its model has to see what its tools returned); the conversation before
it is the model's to keep, as a provider's stored conversation would.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from baseline_activities import (
        ATTEMPT_TIMEOUT,
        LOCAL_ATTEMPT_TIMEOUT,
        RETRY,
        WORKFLOW_NAME,
        LoopInput,
        LoopResult,
        ModelInput,
        ToolInput,
        model,
        tool,
    )


@workflow.defn(name=WORKFLOW_NAME)
class BaselineLoop:
    @workflow.run
    async def run(self, inp: LoopInput) -> LoopResult:
        task_id = workflow.info().workflow_id
        padding = "p" * inp.padding
        done = 0
        last_output: str | None = None
        while True:
            reply = await self._call(inp, model, ModelInput(task_id, inp.steps, done, inp.output_bytes, padding, last_output))
            if reply.tool_call is None:
                return LoopResult(answer=reply.text or "", steps=done)
            output = await self._call(inp, tool, ToolInput(task_id, reply.tool_call, padding))
            last_output = output if inp.model_reads_results else None
            done += 1

    @staticmethod
    async def _call(inp: LoopInput, activity: Any, arg: Any) -> Any:
        """One call as the loop's kind of activity: local (no heartbeat, bounded) or ordinary."""
        if inp.local:
            return await workflow.execute_local_activity(
                activity, arg, start_to_close_timeout=LOCAL_ATTEMPT_TIMEOUT, retry_policy=RETRY)
        heartbeat = timedelta(seconds=inp.heartbeat_seconds) if inp.heartbeat_seconds else None
        return await workflow.execute_activity(
            activity, arg, start_to_close_timeout=ATTEMPT_TIMEOUT, heartbeat_timeout=heartbeat, retry_policy=RETRY)
