"""AgentWorkflow: the Policy/decide loop as a deterministic Temporal workflow.

The loop and the handlers live here. What a run holds and how it continues as new is in
:mod:`~noeta.workflows.run` (its state is one :class:`~noeta.protocols.task.Carry`, the object a
continued run starts from); guards and approvals in :mod:`~noeta.workflows.gates`; the steps it
takes in :mod:`~noeta.workflows.actions`, each scheduling a typed function of
:mod:`~noeta.workflows.steps`; goals, injections and search attributes have modules of their own. The
in-memory transcript is rebuilt on replay from activity results, while history carries only
references and deltas (see noeta.context.transcript).

Why ~360 lines: Temporal declares a workflow's handlers on its class, and the decide loop is one
method over the whole run; both stay here, with a third of the file being their imports.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError

from noeta.protocols.appends import (
    goal_message,
    recalled_messages,
    tool_round_message,
)
from noeta.protocols.bounds import settings_problem
from noeta.protocols.decisions import CallModel, CallTools, Finish, SpawnSubtask
from noeta.protocols.hooks import ProposedSpawnSubtask, ProposedToolCall
from noeta.protocols.messages import ToolUseBlock
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
from noeta.protocols.statuses import GoalStatus
from noeta.protocols.step_context import StepContext
from noeta.protocols.task import (
    ApprovalInput,
    ApprovalRequest,
    GoalInput,
    InjectInput,
    ReleaseInput,
    TaskInput,
    TaskResult,
)
from noeta.protocols.view import View
from noeta.workflows import details, steps
from noeta.workflows.actions import Actions
from noeta.workflows.approvals import Approvals
from noeta.workflows.budget import (
    Budget,
    count_tool_calls,
    spend_of,
    with_spend,
)
from noeta.workflows.failures import policy_error
from noeta.workflows.goals import accept_goal, check_goal
from noeta.workflows.index import SearchIndex
from noeta.workflows.injections import queue_injection, take_injections
from noeta.workflows.policies import load_policy
from noeta.workflows.run import run_state
from noeta.workflows.subagents import spawn_problem


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow(Actions):
    @workflow.init
    def __init__(self, task: TaskInput) -> None:
        # Set before any handler runs: a send_goal may arrive in the very first workflow task.
        self._task = task
        self._state = run_state(task)
        self._transcript = []
        self._tools = {spec.name: spec for spec in self._state.tools}
        self._approvals = Approvals()
        self._index = SearchIndex(task.index, task.index_cost, task.index_interval_seconds)
        self._budget = Budget(task.limits, self._state) if task.limits is not None else None
        self._finish_refusals = 0
        self._last_refusal = ""
        self._ctx = None
        self._continuing = False
        self._details = details.CurrentDetails()
        self._tool_calls = 0

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

    def _result(self, answer: str, status: GoalStatus, index: int, data: Any = None) -> TaskResult:
        result = TaskResult(
            answer=answer,
            # A policy is user code: anything but "failed" counts as completed, whatever it typed.
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

