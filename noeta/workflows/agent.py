"""AgentWorkflow: the Policy/decide loop as a deterministic Temporal workflow.

The loop lives here; each step it schedules is a typed function of :mod:`noeta.workflows.steps`,
its run state is one :class:`~noeta.protocols.task.Carry` (the same object a continued run starts
from), and approvals, goals, injections and search attributes have modules of their own. The
in-memory transcript is rebuilt on replay from activity results, while history carries only
references and deltas (see noeta.context.transcript).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError

from noeta.protocols.appends import (
    SUBTASK_DID_NOT_COMPLETE,
    engine_feedback,
    goal_message,
    recalled_messages,
    subtask_failed_block,
    subtask_result_block,
    tool_result_block,
    tool_round_message,
)
from noeta.protocols.bounds import settings_problem
from noeta.protocols.decisions import CallModel, CallTools, Finish, SpawnSubtask
from noeta.protocols.hooks import (
    GuardDecision,
    ProposedAction,
    ProposedFinish,
    ProposedSpawnSubtask,
    ProposedToolCall,
    combine,
)
from noeta.protocols.mcp import McpTarget
from noeta.protocols.messages import Message, ToolResultBlock, ToolUseBlock
from noeta.protocols.names import (
    INJECTED_MEMO_KEY,
    QUERY_PENDING_APPROVALS,
    QUERY_PROGRESS,
    RESULT_MEMO_KEY,
    SIGNAL_CLOSE,
    SIGNAL_INJECT,
    UPDATE_APPROVE,
    UPDATE_SEND_GOAL,
    WORKFLOW_NAME,
)
from noeta.protocols.policy import Policy
from noeta.protocols.scope import merge_scopes
from noeta.protocols.step_context import StepContext
from noeta.protocols.task import (
    CONFIGURATION_ERRORS,
    TASK_FATAL_TOOL_ERRORS,
    ApprovalInput,
    ApprovalRequest,
    CallModelInput,
    Carry,
    CheckGuardsInput,
    GoalInput,
    InjectInput,
    InvokeToolInput,
    LoadTranscriptInput,
    ReleaseInput,
    TaskInput,
    TaskResult,
    ValidateInput,
    ValidateOutput,
    denied_by_guard,
    finish_denied_feedback,
    not_approved,
    tool_failed_text,
    validation_feedback,
)
from noeta.protocols.tool import ToolResult, ToolSpec
from noeta.protocols.view import View
from noeta.workflows import details, refusals, steps
from noeta.workflows.approvals import Approvals
from noeta.workflows.budget import (
    Budget,
    add_failed_spend,
    count_model_call,
    count_tool_calls,
    spend_of,
    with_spend,
)
from noeta.workflows.failures import (
    attempts_exhausted,
    failure_message,
    policy_error,
    raise_if_cancelled,
    typed_task_error,
)
from noeta.workflows.goals import accept_goal, check_goal, recent
from noeta.workflows.index import SearchIndex
from noeta.workflows.injections import queue_injection, take_injections
from noeta.workflows.policies import load_policy
from noeta.workflows.subagents import child_task, run_env, spawn_problem


def run_state(task: TaskInput) -> Carry:
    """The state a run starts from: its carry (copied: the input stays as recorded) or a fresh one."""
    carry = task.carry
    if carry is None:
        return Carry()
    return dataclasses.replace(
        carry,
        pending=list(carry.pending),
        tools=list(carry.tools),
        validation_issues=list(carry.validation_issues),
        injections=list(carry.injections),
        goal_queue=list(carry.goal_queue),
        goal_ids=dict(carry.goal_ids),
        recent_results=dict(carry.recent_results),
        budget_warned=list(carry.budget_warned),
    )


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    @workflow.init
    def __init__(self, task: TaskInput) -> None:
        # Set before any handler runs: a send_goal may arrive in the very first workflow task.
        self._task = task
        self._state = run_state(task)
        self._transcript: list[Message] = []  # the stored transcript (loaded on resume) + pending
        self._tools: dict[str, ToolSpec] = {spec.name: spec for spec in self._state.tools}
        self._approvals = Approvals()
        self._index = SearchIndex(task.index, task.index_cost)
        self._budget = Budget(task.limits, self._state) if task.limits is not None else None
        self._finish_refusals = 0  # in the current goal (and run)
        self._last_refusal = ""
        self._ctx: StepContext | None = None
        self._continuing = False  # continue-as-new: the task goes on, its resources stay
        self._details = details.CurrentDetails()  # the UI's "Current Details" (not in history)
        self._tool_calls = 0  # tool calls scheduled by this run: numbers their idempotency keys

    # -- handlers -------------------------------------------------------------------------------

    # A task that fails mid-goal fails its waiting send_goal callers too: nothing is lost by abandoning.
    @workflow.update(
        name=UPDATE_SEND_GOAL,
        unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON,
        description='The next goal of a keep_open task: {"goal": "..."}; answers with its result.',
    )
    async def send_goal(self, goal: GoalInput) -> TaskResult:
        """The next goal of a multi-turn task; returns that goal's result."""
        index = accept_goal(self._state, goal)
        results = self._state.recent_results
        await workflow.wait_condition(lambda: index in results)
        return results[index]

    @send_goal.validator
    def _validate_goal(self, goal: GoalInput) -> None:
        check_goal(self._state, self._task.keep_open, goal)

    @workflow.update(
        name=UPDATE_APPROVE,
        description='Answer an action waiting for approval: {"call_id": "c1", "approved": true, '
        '"reason": "...", "approver": "..."} (approved false refuses it).',
    )
    def approve(self, decision: ApprovalInput) -> None:
        """A human's answer to an action that a guard sent for approval."""
        self._approvals.answer(decision)

    @approve.validator
    def _validate_approval(self, decision: ApprovalInput) -> None:
        self._approvals.check_answer(decision)

    @workflow.query(name=QUERY_PENDING_APPROVALS, description="Actions waiting for a human's approval.")
    def pending_approvals(self) -> list[ApprovalRequest]:
        return list(self._approvals.pending.values())

    @workflow.signal(name=SIGNAL_INJECT, description='Context for the next step: {"text": "...", "origin": "system"}.')
    def inject(self, message: InjectInput) -> None:
        """Host context (origin "system" or "memory") for the model's next step."""
        queue_injection(self._state.injections, message)

    @workflow.signal(name=SIGNAL_CLOSE, description="Let a keep_open task end after its queued goals.")
    def close(self) -> None:
        """End a keep-open task once queued goals are done."""
        self._state.closed = True

    @workflow.query(name=QUERY_PROGRESS, description="Turns, messages, usage and goals done so far.")
    def progress(self) -> dict[str, Any]:
        return {
            "turns": self._state.total_turns,
            "messages": len(self._transcript),
            "usage": self._state.usage,
            "counts": self._state.counts,
            "goals_done": len(self._state.recent_results),
        }

    # -- the loop -------------------------------------------------------------------------------

    def _update_index(self, status: str | None = None) -> None:
        # The resolved model rides on upserts that happen anyway (no extra history event).
        model = self._state.model if self._task.model is None else None
        self._index.update(self._state.total_turns, self._state.usage, status, model=model)

    def _show(self, text: str) -> None:
        self._details.doing(text, self._approvals.pending, self._task.approval_timeout_seconds)

    @workflow.run
    async def run(self, task: TaskInput) -> TaskResult:
        # Input that reached Temporal without Options' checks fails the task, typed, before any
        # step; left unchecked it could fail every workflow task forever (timedelta(nan)...).
        problem = settings_problem(task)
        if problem is not None:
            raise ApplicationError(problem, {"message": problem}, type="ConfigurationError", non_retryable=True)
        try:
            result = await self._run_indexed(task)
        except (Exception, asyncio.CancelledError):  # not continue-as-new or eviction (BaseException)
            await self._release_resources()
            raise
        await self._release_resources()
        return result

    async def _release_resources(self) -> None:
        """The task ends: its task-scoped resources go, whatever the outcome (also on cancel)."""
        owned = self._state.owned_resources
        if owned and not self._continuing:
            keys = [r.key for r in owned]
            await steps.release_resources(self._task, ReleaseInput(workflow.info().workflow_id, keys))

    async def _run_indexed(self, task: TaskInput) -> TaskResult:
        try:
            return await self._run(task)
        except asyncio.CancelledError:
            self._update_index("cancelled")
            raise
        except (ActivityError, ChildWorkflowError) as err:
            if isinstance(err.cause, CancelledError):
                self._update_index("cancelled")
                raise asyncio.CancelledError(str(err.cause)) from err
            self._update_index("failed")
            raise
        except ApplicationError as err:
            self._update_index("failed")
            failure = with_spend(err, spend_of(self._state)) if self._budget is not None else err
            if failure is not err:  # a parent adds a failed sub-agent's spend to its own
                raise failure from err
            raise

    async def _run(self, task: TaskInput) -> TaskResult:
        info = workflow.info()
        state = self._state
        policy = load_policy(task.policy)
        resumed = task.carry is not None
        if resumed:
            await self._restore()
        else:
            plan = await steps.prepare(task)
            state.tools, state.trace_id = plan.tools, task.trace_id or info.workflow_id
            state.system_ref, state.output_schema_ref = plan.system_ref, plan.output_schema_ref
            state.volatile_ref, state.mcp_tools_ref = plan.volatile_ref, plan.mcp_tools_ref
            state.owned_resources, state.agents_ref = list(plan.resources), plan.agents_ref
            self._tools = {spec.name: spec for spec in plan.tools}
        ctx = StepContext(
            task_id=info.workflow_id,
            trace_id=state.trace_id,
            model=task.model,
            tools=state.tools,
            max_turns=task.max_turns,
            system_prompt=task.system_prompt,
            metadata=task.metadata,
            scope=merge_scopes(task.scope),
            subagents=tuple(a.name for a in task.subagents),
        )
        self._ctx = ctx
        index = state.goal_index
        goal: GoalInput | None = None if resumed else GoalInput(goal=task.goal, images=task.images)
        resuming_idle = resumed and not state.in_goal  # its result came in the carry
        results = state.recent_results
        while True:
            if not resuming_idle:
                results[index] = await self._run_goal(policy, ctx, goal, index)
            resuming_idle = False
            if not task.keep_open:
                self._update_index(results[index].status)
                return results[index]
            if not state.goal_queue:
                self._update_index("idle")
                self._show(details.idle(len(results)))
            await workflow.wait_condition(
                lambda: bool(state.goal_queue) or state.closed or self._should_continue_as_new()
            )
            if not state.goal_queue and not state.closed:
                self._continue_as_new(index, in_goal=False)
            if not state.goal_queue:
                await workflow.wait_condition(workflow.all_handlers_finished)
                self._update_index(results[index].status)
                return results[index]
            index, goal = state.goal_queue.pop(0)
            state.goal_index = index
            self._update_index("running")

    # -- continue-as-new ----------------------------------------------------------------------

    def _should_continue_as_new(self) -> bool:
        """At a safe point only: no update waiting on this run, no approval pending."""
        info = workflow.info()
        limit = self._task.max_history_events
        suggested = info.is_continue_as_new_suggested() or (
            limit is not None and info.get_current_history_length() >= limit
        )
        # send_goal callers still waiting are abandoned here and re-send their goal_id to the next
        # run (AsyncClient.send_goal does), so they do not hold the task in an ever-growing run.
        return suggested and not self._approvals.pending

    def _continue_as_new(self, index: int, in_goal: bool) -> NoReturn:
        state = self._state
        # Enough of the goals' bookkeeping to answer callers that follow their goal; bounded.
        results, goal_ids = recent(state.recent_results, state.goal_ids, index)
        carry = dataclasses.replace(
            state,
            goal_index=index,
            in_goal=in_goal,
            recent_results=results,
            goal_ids=goal_ids,
            runs=(state.runs + 1) if self._task.carry else 1,
        )
        # Channels are already composed into the carried refs; dropping them keeps the input small.
        self._continuing = True
        workflow.continue_as_new(dataclasses.replace(self._task, carry=carry, channels=[]))

    async def _restore(self) -> None:
        state = self._state
        loaded = await steps.load_transcript(self._task, LoadTranscriptInput(head=state.head), state.runs + 1)
        self._transcript = [*loaded.messages, *state.pending]

    def _append(self, message: Message) -> None:
        self._transcript.append(message)
        self._state.pending.append(message)

    def _take_injections(self) -> None:
        """Injected messages enter the transcript between steps, never inside a tool round."""
        if not self._state.injections:
            return
        messages = take_injections(self._state.injections)
        for message in messages:
            self._append(message)
        workflow.upsert_memo({INJECTED_MEMO_KEY: messages})  # records the step they entered at

    async def _run_goal(
        self, policy: Policy, ctx: StepContext, goal: GoalInput | None, index: int
    ) -> TaskResult:
        """Run goal ``index`` to its result; ``goal`` None resumes it after continue-as-new."""
        state = self._state
        if goal is not None:
            self._append(goal_message(goal.goal, goal.images))
            state.turn = 0
            state.validation_issues = []
            self._finish_refusals = 0
            if self._budget is not None:
                self._budget.goal_started()
        while True:
            if self._should_continue_as_new():
                self._continue_as_new(index, in_goal=True)
            self._take_injections()
            view = View(
                transcript=tuple(self._transcript),
                usage=state.usage,
                turn=state.turn,
                budget=max(0, ctx.max_turns - state.turn),
                pending_approvals=tuple(self._approvals.pending),
            )
            try:
                decision = policy.decide(ctx, view)
            except Exception as err:  # a bug in a policy must fail the task, not wedge it
                raise policy_error(policy, err) from err
            if isinstance(decision, Finish):
                if decision.status != "failed" and not await self._finish_allowed(decision, index):
                    if self._finish_refusals >= ctx.max_turns:  # a policy that keeps trying to finish
                        return self._result(
                            f"finishing was refused {self._finish_refusals} times; the last refusal: "
                            f"{self._last_refusal}",
                            "failed",
                            index,
                        )
                    continue
                if decision.status == "failed" or not (self._task.output_schema or self._task.validators):
                    return self._result(decision.answer, decision.status, index)
                checked = await self._validate(decision.answer)
                if checked.ok:
                    return self._result(decision.answer, "completed", index, checked.data)
                continue
            if isinstance(decision, CallModel):
                if state.turn >= ctx.max_turns:
                    return self._result(
                        f"max_turns ({ctx.max_turns}) reached before the task finished", "failed", index
                    )
                await self._call_model(decision)
            elif isinstance(decision, CallTools):
                names = [c.tool_name for c in decision.calls]
                if self._budget is not None:
                    self._budget.check(tools=names)
                self._show(details.running_tools(decision.calls))
                verdicts = await self._check_guards(
                    [
                        ProposedToolCall(c.call_id, c.tool_name, c.arguments, self._risk(c.tool_name))
                        for c in decision.calls
                    ]
                )
                count_tool_calls(state, names)
                results = await asyncio.gather(
                    *(self._guarded_tool(c, verdicts.get(c.call_id)) for c in decision.calls)
                )
                self._append(tool_round_message([block for block, _ in results]))
                # recalled by the memory tool: the engine's context, after the results
                for message in recalled_messages([text for _, memories in results for text in memories]):
                    self._append(message)
                if self._budget is not None:
                    self._budget.warn()
            elif isinstance(decision, SpawnSubtask):
                refusal = spawn_problem(self._task, decision)
                if refusal is None:
                    verdict = (await self._check_guards([ProposedSpawnSubtask(decision.call_id, decision.goal)])).get(
                        decision.call_id
                    )
                    refusal = await self._refusal(ProposedSpawnSubtask(decision.call_id, decision.goal), verdict)
                if refusal is None:
                    if self._budget is not None:
                        self._budget.check()
                    block = await self._spawn(ctx, decision)
                else:  # recorded like a rejected tool call named "subtask" (or the sub-agent's name)
                    block, _ = await self._invoke_tool(
                        ToolUseBlock(
                            call_id=decision.call_id,
                            tool_name=decision.agent or "subtask",
                            arguments={"goal": decision.goal},
                        ),
                        reject=refusal,
                    )
                self._append(tool_round_message([block]))
            else:
                raise ApplicationError(
                    f"policy returned {type(decision).__name__}, which is not a Decision",
                    type="PolicyLoadError",
                    non_retryable=True,
                )

    def _result(self, answer: str, status: str, index: int, data: Any = None) -> TaskResult:
        result = TaskResult(
            answer=answer,
            status="failed" if status == "failed" else "completed",
            usage=self._state.usage,
            turns=self._state.turn,
            goal_index=index,
            data=data,
            counts=self._state.counts,
        )
        # Recorded in history (and shown in the UI's memo) so every goal's outcome is projectable.
        workflow.upsert_memo({RESULT_MEMO_KEY: result})
        self._show(details.finished(result.status, answer))
        return result

    # -- guards and approvals -------------------------------------------------------------------

    def _risk(self, tool_name: str) -> str:
        spec = self._tools.get(tool_name)
        return spec.risk_level if spec else "high"

    async def _check_guards(self, actions: list[ProposedAction]) -> dict[str, GuardDecision]:
        """The deciding verdict per action id (absent: allowed). Recorded, so replay never re-asks."""
        task = self._task
        if not task.guards or not actions:
            return {}
        self._details.refresh(self._approvals.pending, task.approval_timeout_seconds)
        out = await steps.check_guards(
            task,
            CheckGuardsInput(
                task_id=workflow.info().workflow_id,
                trace_id=self._ctx.trace_id if self._ctx else workflow.info().workflow_id,
                turn=self._state.total_turns,
                guards=task.guards,
                actions=actions,
                metadata=task.metadata,
                env=run_env(task, self._state),
            ),
        )
        deciding = {}
        for action in actions:
            verdict = combine([v for v in out.verdicts if v.call_id == action.call_id])
            if verdict is not None:
                deciding[action.call_id] = verdict
        return deciding

    async def _refusal(self, action: ProposedAction, verdict: GuardDecision | None) -> str | None:
        """None when the action may go ahead; else why not (a denial, or a human's refusal)."""
        if verdict is None:
            return None
        if verdict.verdict == "deny":
            return denied_by_guard(verdict.guard, verdict.reason)
        decision = await self._await_approval(ApprovalRequest(action.call_id, action, verdict.reason, verdict.guard))
        return None if decision.approved else not_approved(decision)

    async def _await_approval(self, request: ApprovalRequest) -> ApprovalInput:
        """Wait durably for ``approve``; no answer within the timeout is a refusal."""
        timeout = self._task.approval_timeout_seconds
        self._approvals.open(request)
        self._update_index("awaiting_approval")
        self._details.refresh(self._approvals.pending, timeout)
        decision = await self._approvals.wait(request, timeout)
        if not self._approvals.pending:
            self._update_index("running")
        self._details.refresh(self._approvals.pending, timeout)
        return decision

    async def _guarded_tool(self, call: ToolUseBlock, verdict: GuardDecision | None) -> tuple[ToolResultBlock, list[str]]:
        refusal = await self._refusal(
            ProposedToolCall(call.call_id, call.tool_name, call.arguments, self._risk(call.tool_name)), verdict
        )
        if refusal is None and verdict is not None and self._budget is not None:
            self._budget.check()  # a human may have taken longer than the goal's time limit allows
        return await self._invoke_tool(call, reject=refusal)

    async def _finish_allowed(self, decision: Finish, index: int) -> bool:
        if not self._task.guards:
            return True
        self._state.finish_attempts += 1
        action = ProposedFinish(decision.answer, decision.status, call_id=f"finish:{index}:{self._state.finish_attempts}")
        refusal = await self._refusal(action, (await self._check_guards([action])).get(action.call_id))
        if refusal is None:
            return True
        self._finish_refusals += 1
        self._last_refusal = refusal
        self._append(engine_feedback(finish_denied_feedback(refusal)))
        return False

    # -- steps ------------------------------------------------------------------------------------

    async def _validate(self, answer: str) -> ValidateOutput:
        """Check the final answer; on failure tell the model why, or give up after max_retries."""
        task, state = self._task, self._state
        self._show(details.validating(len(task.validators), task.output_schema is not None))
        checked = await steps.validate_output(
            task,
            ValidateInput(
                task_id=workflow.info().workflow_id,
                answer=answer,
                output_schema=task.output_schema,
                validators=task.validators,
                env=run_env(task, state),
            ),
        )
        if checked.ok:
            return checked
        issue = checked.issue or "Validation failed"
        state.validation_issues.append(issue)
        if len(state.validation_issues) > task.max_retries:
            raise attempts_exhausted(
                len(state.validation_issues),
                list(state.validation_issues),
                checked.failure_type or "validator",
                checked.data,
                answer,
            )
        # The feedback is the engine's, not the user's: origin "system" (an InjectedMessage).
        self._append(engine_feedback(validation_feedback(issue)))
        return checked

    async def _call_model(self, decision: CallModel) -> None:
        task, state = self._task, self._state
        budget = self._budget
        max_tokens = decision.max_tokens or task.max_tokens
        if budget is not None:
            budget.check(model_calls=1)
            max_tokens = budget.max_tokens(max_tokens)
        state.turn += 1
        state.total_turns += 1
        request = CallModelInput(
            task_id=workflow.info().workflow_id,
            provider=task.provider,
            model=task.model,
            head=state.head,
            append=list(state.pending),
            system_ref=state.system_ref,
            tools=decision.tools if decision.tools is not None else [*self._tools, *(a.name for a in task.subagents)],
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
        )
        self._show(details.calling_model(task.provider, task.model or state.model, state.turn, task.max_turns))
        out = await steps.call_model(task, request)
        if out.model and task.model is None:
            state.model = out.model
        state.head = out.head
        state.pending.clear()
        self._transcript.append(Message(role="assistant", content=out.response.content))
        state.usage = state.usage + out.response.usage
        count_model_call(state)
        self._update_index()
        if budget is not None:
            budget.warn()

    async def _invoke_tool(self, call: ToolUseBlock, reject: str | None = None) -> tuple[ToolResultBlock, list[str]]:
        """Run one tool call; with ``reject`` (or an unknown tool) the call is recorded as refused.
        Returns the result and the memories the call recalled (the memory tool's)."""
        spec = None if reject else self._tools.get(call.tool_name)
        if spec is None and reject is None:
            available = ", ".join(sorted(self._tools)) or "none"
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
            workspace_dir=self._task.workspace_dir,
            validate_input=self._task.validate_tool_input,
            mcp=self._mcp_target(spec),
            env=None if reject else run_env(self._task, self._state),
            # Engine-assigned: unique even when a model reuses call ids, the same on every attempt.
            idempotency_key=steps.step_key(str(self._tool_calls)),
        )
        memories: list[str] = []
        try:
            out = await steps.invoke_tool(self._task, inp, spec)
            result, memories = out.result, out.memories
        except ActivityError as err:
            raise_if_cancelled(err)
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type in TASK_FATAL_TOOL_ERRORS:
                raise typed_task_error(cause) from err
            result = ToolResult(success=False, output=tool_failed_text(call.tool_name, failure_message(err)))
        return tool_result_block(call.call_id, result), memories

    def _mcp_target(self, spec: ToolSpec | None) -> McpTarget | None:
        """Where a remote MCP server's tool is called (its server's configuration as recorded)."""
        if spec is None or spec.mcp_server is None or spec.mcp_tool is None:
            return None
        server = self._task.mcp_servers.get(spec.mcp_server)
        return McpTarget(spec.mcp_server, spec.mcp_tool, server) if server is not None else None

    async def _spawn(self, ctx: StepContext, spawn: SpawnSubtask) -> ToolResultBlock:
        child_id = f"{ctx.task_id}/sub/{spawn.call_id}"
        child = child_task(self._task, self._state, ctx, spawn, child_id)
        # What is left of this task's limits (within a declared agent's own); its spend comes back
        # with its result, or in its failure.
        given = self._budget.left() if self._budget is not None else None
        child = dataclasses.replace(
            child,
            index_cost=self._task.index_cost,
            limits=given.within(child.limits) if given is not None else child.limits,
        )
        self._show(details.running_subtask(child_id, spawn.goal))
        try:
            result = await steps.run_subtask(child, child_id, spawn.goal)
        except ChildWorkflowError as err:
            raise_if_cancelled(err)  # the parent is being cancelled: so is the task, not just the child
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.details:
                if self._budget is not None and given is not None:
                    self._budget.add_child_failure(cause.details[0], given)  # raises when ours ran out
                else:  # a sub-agent with limits of its own reports its spend when it fails
                    add_failed_spend(self._state, cause.details[0])
            if isinstance(cause, ApplicationError) and cause.type in CONFIGURATION_ERRORS:
                raise typed_task_error(cause) from err  # a missing resource, a bad scope: ours to fix
            # A child that failed says why; one terminated or timed out has nothing to say.
            reason = failure_message(err) if isinstance(cause, ApplicationError) else SUBTASK_DID_NOT_COMPLETE
            return subtask_failed_block(spawn.call_id, reason)
        self._state.usage = self._state.usage + result.usage
        self._state.counts = self._state.counts + result.counts
        if self._budget is not None:
            self._budget.warn()
        return subtask_result_block(spawn.call_id, result)
