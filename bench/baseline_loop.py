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
        heartbeat = timedelta(seconds=inp.heartbeat_seconds) if inp.heartbeat_seconds else None
        padding = "p" * inp.padding
        done = 0
        last_output: str | None = None
        while True:
            model_input = ModelInput(task_id, inp.steps, done, inp.output_bytes, padding, last_output)
            if inp.local:
                reply = await workflow.execute_local_activity(
                    model, model_input, start_to_close_timeout=LOCAL_ATTEMPT_TIMEOUT, retry_policy=RETRY)
            else:
                reply = await workflow.execute_activity(
                    model, model_input,
                    start_to_close_timeout=ATTEMPT_TIMEOUT, heartbeat_timeout=heartbeat, retry_policy=RETRY,
                )
            if reply.tool_call is None:
                return LoopResult(answer=reply.text or "", steps=done)
            tool_input = ToolInput(task_id, reply.tool_call, padding)
            if inp.local:
                output = await workflow.execute_local_activity(
                    tool, tool_input, start_to_close_timeout=LOCAL_ATTEMPT_TIMEOUT, retry_policy=RETRY)
            else:
                output = await workflow.execute_activity(
                    tool, tool_input,
                    start_to_close_timeout=ATTEMPT_TIMEOUT, heartbeat_timeout=heartbeat, retry_policy=RETRY,
                )
            last_output = output if inp.model_reads_results else None
            done += 1
