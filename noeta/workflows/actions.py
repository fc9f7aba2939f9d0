"""The steps a run schedules: model calls, tool calls (behind their guards' verdicts), output
validation and sub-agents, each turning its activity's outcome into transcript messages."""

from __future__ import annotations

import asyncio
import dataclasses

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

from noeta.protocols.appends import (
    SUBTASK_DID_NOT_COMPLETE,
    engine_feedback,
    recalled_messages,
    subtask_failed_block,
    subtask_result_block,
    tool_result_block,
    tool_round_message,
)
from noeta.protocols.decisions import CallModel, CallTools, SpawnSubtask
from noeta.protocols.hooks import GuardDecision, ProposedSpawnSubtask
from noeta.protocols.mcp import McpTarget
from noeta.protocols.messages import Message, ToolResultBlock, ToolUseBlock
from noeta.protocols.step_context import StepContext
from noeta.protocols.step_failures import (
    failed_tool_result,
    subtask_failure_ends_task,
    tool_failure_ends_task,
    validation_failure_type,
    validation_gives_up,
    validation_issue,
)
from noeta.protocols.task import (
    CallModelInput,
    InvokeToolInput,
    ValidateInput,
    ValidateOutput,
    validation_feedback,
)
from noeta.protocols.tool import ToolSpec
from noeta.workflows import details, refusals, steps
from noeta.workflows.compaction import ContextKeeper
from noeta.workflows.elicitations import invoke_answering
from noeta.workflows.budget import Budget, add_failed_spend, count_model_call, count_tool_calls
from noeta.workflows.failures import (
    attempts_exhausted,
    failure_message,
    raise_if_cancelled,
    typed_task_error,
)
from noeta.workflows.fallback import ProviderFallback
from noeta.workflows.gates import Gate
from noeta.workflows.run import RunState
from noeta.workflows.sampling import Sampler
from noeta.workflows.status import RunStatus
from noeta.workflows.subagents import child_task, spawn_problem


class StepRunner:
    """Carries out the policy's decisions: schedules the model call, the tool calls a guard let
    through, the output check and the sub-agent, and writes what came back into the run."""

    def __init__(self, run: RunState, gate: Gate, status: RunStatus, budget: Budget | None) -> None:
        """The runner writes into ``run``, checks actions through ``gate``, reports through
        ``status`` and counts calls against ``budget`` (None: no limits)."""
        self._run = run
        self._gate = gate
        self._status = status
        self._budget = budget
        self._tool_calls = 0
        """Tool calls scheduled by this run: numbers their idempotency keys."""
        self._context = ContextKeeper(run)
        self._fallback = ProviderFallback(run)
        """Counts each model request and compacts the context before it would pass the window."""
        self._sampler = Sampler(run, gate, status, budget)
        """Answers remote MCP servers' sampling requests with the task's model."""

    async def run_tools(self, decision: CallTools) -> None:
        """One tool round: the calls' guards, then every call in parallel; their results (and the
        memories the memory tool recalled) join the transcript as one message."""
        run, budget = self._run, self._budget
        names = [c.tool_name for c in decision.calls]
        if budget is not None:
            budget.check(tools=names)
        self._status.show(details.running_tools(decision.calls))
        verdicts = await self._gate.verdicts([self._gate.proposed_call(c) for c in decision.calls])
        count_tool_calls(run.state, names)
        results = await asyncio.gather(*(self._guarded_tool(c, verdicts.get(c.call_id)) for c in decision.calls))
        run.append(tool_round_message([block for block, _ in results]))
        # recalled by the memory tool: the engine's context, after the results
        for message in recalled_messages([text for _, memories in results for text in memories]):
            run.append(message)
        if budget is not None:
            budget.warn()

    async def spawn_subtask(self, ctx: StepContext, decision: SpawnSubtask) -> None:
        """A sub-agent behind its guards; its answer, or why it did not run, is the call's result."""
        refusal = spawn_problem(self._run.task, decision)
        if refusal is None:
            refusal = await self._gate.check(ProposedSpawnSubtask(decision.call_id, decision.goal))
        if refusal is None:
            if self._budget is not None:
                self._budget.check()
            block = await self._spawn(ctx, decision)
        else:  # recorded like a rejected tool call named "subtask" (or the sub-agent's name)
            block, _ = await self._invoke_tool(
                ToolUseBlock(call_id=decision.call_id, tool_name=decision.agent or "subtask", arguments={"goal": decision.goal}),
                reject=refusal,
            )
        self._run.append(tool_round_message([block]))

    async def _guarded_tool(self, call: ToolUseBlock, verdict: GuardDecision | None) -> tuple[ToolResultBlock, list[str]]:
        call, refusal = await self._gate.tool_call(call, verdict)  # an approver may have edited it
        if refusal is None and verdict is not None and self._budget is not None:
            self._budget.check()  # a human may have taken longer than the goal's time limit allows
        return await self._invoke_tool(call, reject=refusal)

    async def validate(self, answer: str) -> ValidateOutput:
        """Check the final answer; on failure tell the model why, or give up after max_retries."""
        task, state = self._run.task, self._run.state
        self._status.show(details.validating(len(task.validators), task.output_schema is not None))
        checked = await steps.validate_output(
            task,
            ValidateInput(
                task_id=workflow.info().workflow_id,
                answer=answer,
                output_schema=task.output_schema,
                validators=task.validators,
                env=self._run.env(),
            ),
        )
        if checked.ok:
            return checked
        issue = validation_issue(checked)
        state.validation_issues.append(issue)
        if validation_gives_up(len(state.validation_issues), task.max_retries):
            raise attempts_exhausted(
                len(state.validation_issues),
                list(state.validation_issues),
                validation_failure_type(checked),
                checked.data,
                answer,
            )
        # The feedback is the engine's, not the user's: origin "system" (an InjectedMessage).
        self._run.append(engine_feedback(validation_feedback(issue)))
        return checked

    async def call_model(self, decision: CallModel) -> None:
        """Call the model (within the task's limits); its reply joins the transcript."""
        task, state = self._run.task, self._run.state
        budget = self._budget
        max_tokens = decision.max_tokens or task.max_tokens
        if budget is not None:
            budget.check(model_calls=1)
            max_tokens = budget.max_tokens(max_tokens)
        state.turn += 1
        state.total_turns += 1
        on = self._fallback.current()  # the task's provider, or the fallback it moved to
        request = CallModelInput(
            task_id=workflow.info().workflow_id,
            provider=on.provider,
            model=on.model,
            head=state.head,
            append=list(state.pending),
            system_ref=state.system_ref,
            tools=decision.tools if decision.tools is not None else [*self._run.tools, *(a.name for a in task.subagents)],
            turn=state.total_turns,
            temperature=decision.temperature if decision.temperature is not None else task.temperature,
            max_tokens=max_tokens,
            output_schema_ref=state.output_schema_ref,
            volatile_ref=state.volatile_ref,
            thinking=task.thinking,
            effort=task.effort,
            mcp_tools_ref=state.mcp_tools_ref,
            agents_ref=state.agents_ref,
            step_key=steps.step_key(f"model-{state.total_turns}"),
            max_tool_output_tokens=task.max_tool_output_tokens,
            # Not a command's shape, only its input: histories recorded without it replay the same.
            listened_until=(
                state.stream_listened_until if state.stream_listened_until > workflow.now().timestamp() else None
            ),
        )
        self._status.show(details.calling_model(on.provider, on.model or state.model, state.turn, task.max_turns))
        request = await self._context.fit(request)  # compacted first when it would pass the window's threshold
        # On the task's current provider; the next of its fallback providers when that one fails.
        ordinary, self._run.recovering = self._run.recovering, False
        out = await self._fallback.call(
            request, lambda r: self._context.call(r, lambda c: steps.call_model(task, c, state.shape, ordinary=ordinary))
        )
        self._run.returned(out.from_record)
        if out.model and self._fallback.current().model is None:  # the provider's default: as it reported
            state.model = out.model
        state.head = out.head
        state.pending.clear()
        self._run.transcript.append(Message(role="assistant", content=out.response.content))
        state.usage = state.usage + out.response.usage
        count_model_call(state)
        self._status.update_index()
        if budget is not None:
            budget.warn()

    async def _invoke_tool(self, call: ToolUseBlock, reject: str | None = None) -> tuple[ToolResultBlock, list[str]]:
        """Run one tool call; with ``reject`` (or an unknown tool) the call is recorded as refused.
        Returns the result and the memories the call recalled (the memory tool's)."""
        spec = None if reject else self._run.tools.get(call.tool_name)
        if spec is None and reject is None:
            available = ", ".join(sorted(self._run.tools)) or "none"
            reject = f"Unknown tool {call.tool_name!r}. Available tools: {available}."
        if reject is not None and refusals.recorded():
            return refusals.record_refusal(call, reject), []
        self._tool_calls += 1
        inp = InvokeToolInput(
            task_id=workflow.info().workflow_id,
            call_id=call.call_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
            expected_fingerprint=spec.fingerprint if spec else None,
            reject_reason=reject,
            workspace_dir=self._run.task.workspace_dir,
            validate_input=self._run.task.validate_tool_input,
            mcp=self._mcp_target(spec),
            env=None if reject else self._run.env(),
            # Engine-assigned: unique even when a model reuses call ids, the same on every attempt.
            idempotency_key=steps.step_key(str(self._tool_calls)),
        )
        memories: list[str] = []
        try:
            approved_by = self._gate.approved_by.pop(call.call_id, None)
            out = await invoke_answering(
                self._gate, self._run.task, inp, spec, self._run.state.shape, approved_by, self._sampler
            )
            result, memories = out.result, out.memories
            self._run.returned(out.from_record)
        except ActivityError as err:
            raise_if_cancelled(err)
            cause = err.cause
            if isinstance(cause, ApplicationError) and tool_failure_ends_task(cause.type):
                raise typed_task_error(cause) from err
            result = failed_tool_result(call.tool_name, failure_message(err))
        return tool_result_block(call.call_id, result), memories

    def _mcp_target(self, spec: ToolSpec | None) -> McpTarget | None:
        """Where a remote MCP server's tool is called (its server's configuration as recorded)."""
        if spec is None or spec.mcp_server is None or spec.mcp_tool is None:
            return None
        server = self._run.task.mcp_servers.get(spec.mcp_server)
        return McpTarget(spec.mcp_server, spec.mcp_tool, server) if server is not None else None

    async def _spawn(self, ctx: StepContext, spawn: SpawnSubtask) -> ToolResultBlock:
        child_id = f"{ctx.task_id}/sub/{spawn.call_id}"
        child = child_task(self._run.task, self._run.state, ctx, spawn, child_id)
        # What is left of this task's limits (within a declared agent's own); its spend comes back
        # with its result, or in its failure.
        given = self._budget.left() if self._budget is not None else None
        child = dataclasses.replace(
            child,
            index_cost=self._run.task.index_cost,
            limits=given.within(child.limits) if given is not None else child.limits,
        )
        self._status.show(details.running_subtask(child_id, spawn.goal))
        try:
            result = await steps.run_subtask(child, child_id, spawn.goal)
        except ChildWorkflowError as err:
            raise_if_cancelled(err)  # the parent is being cancelled: so is the task, not just the child
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.details:
                if self._budget is not None and given is not None:
                    self._budget.add_child_failure(cause.details[0], given)  # raises when ours ran out
                else:  # a sub-agent with limits of its own reports its spend when it fails
                    add_failed_spend(self._run.state, cause.details[0])
            if isinstance(cause, ApplicationError) and subtask_failure_ends_task(cause.type):
                raise typed_task_error(cause) from err  # a missing resource, a bad scope: ours to fix
            # A child that failed says why; one terminated or timed out has nothing to say.
            reason = failure_message(err) if isinstance(cause, ApplicationError) else SUBTASK_DID_NOT_COMPLETE
            return subtask_failed_block(spawn.call_id, reason)
        state = self._run.state
        state.usage = state.usage + result.usage
        state.counts = state.counts + result.counts
        if self._budget is not None:
            self._budget.warn()
        return subtask_result_block(spawn.call_id, result)
