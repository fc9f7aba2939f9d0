"""One goal's decide loop: the policy looks at the run and decides; the decision is carried out by
the step runner (actions.py) behind the gate (gates.py), until the policy finishes the goal."""

from __future__ import annotations

from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from noeta.errors import PolicyDecisionError
from noeta.protocols.appends import INTERRUPTED_CALL, INTERRUPTED_GOAL, goal_message, tool_round_message
from noeta.protocols.decisions import CallModel, CallTools, Finish, SpawnSubtask
from noeta.protocols.messages import ToolResultBlock
from noeta.protocols.names import INJECTED_MEMO_KEY, RESULT_MEMO_KEY
from noeta.protocols.policy import Policy
from noeta.protocols.statuses import GoalStatus
from noeta.protocols.step_context import StepContext
from noeta.protocols.task import GoalInput, TaskResult
from noeta.protocols.view import View
from noeta.workflows import details
from noeta.workflows.actions import StepRunner
from noeta.workflows.budget import Budget
from noeta.workflows.busy import BusyGoals
from noeta.workflows.continuation import Continuation
from noeta.workflows.failures import policy_error
from noeta.workflows.gates import Gate
from noeta.workflows.injections import take_injections
from noeta.workflows.run import RunState
from noeta.workflows.status import RunStatus


class GoalLoop:
    """Runs goals to their results: asks the policy for each step, hands the decision to the step
    runner, continues as new between steps when history is long."""

    def __init__(
        self,
        run: RunState,
        gate: Gate,
        steps: StepRunner,
        continuation: Continuation,
        status: RunStatus,
        budget: Budget | None,
        busy: BusyGoals,
    ) -> None:
        """The loop's collaborators: the run's state, the gate, the step runner, the continuation,
        the status, the budget (None: no limits) and the goals sent while it runs."""
        self._run = run
        self._gate = gate
        self._steps = steps
        self._continuation = continuation
        self._status = status
        self._budget = budget
        self._busy = busy

    async def run_goal(
        self, policy: Policy, ctx: StepContext, goal: GoalInput | None, index: int, *, forked_turns: int | None = None
    ) -> TaskResult:
        """Run goal ``index`` to its result; ``goal`` None resumes it after continue-as-new, or
        (``forked_turns`` set) starts a fork's first goal, whose transcript is already in place,
        with that many of its model calls made."""
        run, state = self._run, self._run.state
        if goal is not None or forked_turns is not None:
            if goal is not None:
                run.append(goal_message(goal.goal, goal.images))
            state.turn = forked_turns or 0
            state.validation_issues = []
            self._gate.goal_started()
            if self._budget is not None:
                self._budget.goal_started()
        while True:
            if self._continuation.due():
                self._continuation.hand_over(index, in_goal=True)
            self._take_injections()
            view = View(
                transcript=tuple(run.transcript),
                usage=state.usage,
                turn=state.turn,
                budget=max(0, ctx.max_turns - state.turn),
                pending_approvals=tuple(self._gate.approvals.pending),
            )
            try:
                decision = policy.decide(ctx, view)
            except Exception as err:  # a bug in a policy must fail the task, not wedge it
                raise policy_error(policy, err) from err
            if isinstance(decision, Finish):
                result = await self._finish(decision, ctx, index)
                if result is not None:
                    return result
            elif isinstance(decision, CallModel):
                if state.turn >= ctx.max_turns:
                    return self._result(
                        f"max_turns ({ctx.max_turns}) reached before the task finished", "failed", index
                    )
                await self._steps.call_model(decision)
            elif isinstance(decision, CallTools):
                await self._steps.run_tools(decision)
            elif isinstance(decision, SpawnSubtask):
                await self._steps.spawn_subtask(ctx, decision)
            else:
                raise ApplicationError(
                    f"policy returned {type(decision).__name__}, which is not a Decision",
                    type=PolicyDecisionError.__name__,
                    non_retryable=True,
                )

    async def _finish(self, decision: Finish, ctx: StepContext, index: int) -> TaskResult | None:
        """The goal's result, or None when the finish was refused or its answer failed validation
        (the model was told why; the loop goes on)."""
        gate, task = self._gate, self._run.task
        if decision.status != "failed" and not await gate.finish_allowed(decision, index):
            if gate.finish_refusals >= ctx.max_turns:  # a policy that keeps trying to finish
                return self._result(
                    f"finishing was refused {gate.finish_refusals} times; the last refusal: {gate.last_refusal}",
                    "failed",
                    index,
                )
            return None
        if decision.status == "failed" or not (task.output_schema or task.validators):
            return self._result(decision.answer, decision.status, index)
        checked = await self._steps.validate(decision.answer)
        if checked.ok:
            return self._result(decision.answer, "completed", index, checked.data)
        return None

    def interrupted(self, index: int) -> TaskResult:
        """Goal ``index`` was interrupted by a newer goal: the calls its last model turn asked for
        get an "interrupted" result (the transcript stays one a provider accepts), its approvals
        are withdrawn, and its result says so."""
        run = self._run
        last = run.transcript[-1] if run.transcript else None
        if last is not None and last.role == "assistant" and last.tool_uses:
            run.append(tool_round_message([
                ToolResultBlock(call_id=call.call_id, output=INTERRUPTED_CALL, success=False) for call in last.tool_uses
            ]))
        self._gate.approvals.withdraw_all()
        return self._result(INTERRUPTED_GOAL, "interrupted", index)

    def _take_injections(self) -> None:
        """Injected messages enter the transcript between steps, never inside a tool round (so do
        messages steering the goal: noeta.workflows.busy)."""
        self._busy.take_steering()
        queue = self._run.state.injections
        if not queue:
            return
        messages = take_injections(queue)
        for message in messages:
            self._run.append(message)
        workflow.upsert_memo({INJECTED_MEMO_KEY: messages})  # records the step they entered at

    def _result(self, answer: str, status: GoalStatus | Literal["interrupted"], index: int, data: Any = None) -> TaskResult:
        state = self._run.state
        result = TaskResult(
            answer=answer,
            # A policy is user code: anything but "failed" counts as completed, whatever it typed.
            status=status if status in ("failed", "interrupted") else "completed",
            usage=state.usage,
            turns=state.turn,
            goal_index=index,
            data=data,
            counts=state.counts,
            usage_by_provider=list(state.usage_by_provider),
        )
        # Recorded in history (and shown in the UI's memo) so every goal's outcome is projectable.
        workflow.upsert_memo({RESULT_MEMO_KEY: result})
        self._status.show(details.finished(result.status, answer))
        return result
