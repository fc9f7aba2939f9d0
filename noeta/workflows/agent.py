"""AgentWorkflow: the Policy/decide loop as a deterministic Temporal workflow.

Temporal binds a workflow's handlers to one instance of one class: that class is here, with its
run, update, signal and query handlers and the task's life around its goals. The work is done by
small objects it builds in ``__init__``, each given the collaborators it uses:

- :class:`~noeta.workflows.run.RunState`: what the run holds (the task, its
  :class:`~noeta.protocols.task.Carry`, the transcript, the tools);
- :class:`~noeta.workflows.status.RunStatus`: the search attributes and the UI's Current Details;
- :class:`~noeta.workflows.gates.Gate`: guards and human approvals;
- :class:`~noeta.workflows.actions.StepRunner`: the model calls, tool rounds, validations and
  sub-agents it schedules, each through a typed function of :mod:`~noeta.workflows.steps`;
- :class:`~noeta.workflows.continuation.Continuation`: continue-as-new and resuming after it;
- :class:`~noeta.workflows.loop.GoalLoop`: one goal's decide loop;
- :class:`~noeta.workflows.streams.TaskStream`: the stream of the model calls' pieces.

Goals, injections, budgets and search attributes have modules of their own. The in-memory
transcript is rebuilt on replay from activity results, while history carries only references and
deltas (see noeta.context.transcript).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError

from noeta.errors import ConfigurationError
from noeta.protocols.bounds import settings_problem
from noeta.protocols.held_questions import HeldAnswer, HeldQuestion
from noeta.protocols.names import (
    QUERY_ELICITATION_ANSWER,
    QUERY_PENDING_APPROVALS,
    QUERY_PROGRESS,
    SIGNAL_CLOSE,
    SIGNAL_INJECT,
    SIGNAL_STORE_OUTAGE,
    UPDATE_APPROVE,
    UPDATE_ELICITATION_HELD,
    UPDATE_REFUSE,
    UPDATE_SEND_GOAL,
    WORKFLOW_NAME,
)
from noeta.protocols.policy import Policy
from noeta.protocols.scope import merge_scopes
from noeta.protocols.statuses import ended_as
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
from noeta.workflows import details, steps
from noeta.workflows.actions import StepRunner
from noeta.workflows.approvals import Approvals
from noeta.workflows.budget import Budget, spend_of, with_spend
from noeta.workflows.continuation import Continuation
from noeta.workflows.forks import start_from_fork
from noeta.workflows.gates import Gate
from noeta.workflows.busy import BusyGoals
from noeta.workflows.goals import check_goal
from noeta.workflows.injections import queue_injection
from noeta.workflows.loop import GoalLoop
from noeta.workflows.policies import load_policy
from noeta.workflows.run import RunState
from noeta.workflows.scoring import score_ended_task
from noeta.workflows.status import RunStatus
from noeta.workflows.streams import TaskStream
from noeta.workflows import upgrades


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    """A task: its goals run one after another by the goal loop, its handlers answer the outside."""

    @workflow.init
    def __init__(self, task: TaskInput) -> None:
        """Build the run's parts before any handler runs: a goal may arrive in the very first
        workflow task."""
        # Built before any handler runs: a send_goal may arrive in the very first workflow task.
        run = RunState(task)
        approvals = Approvals()
        status = RunStatus(run, approvals)
        budget = Budget(task.limits, run.state) if task.limits is not None else None
        gate = Gate(run, approvals, status)
        continuation = Continuation(run, approvals)
        runner = StepRunner(run, gate, status, budget)
        busy = BusyGoals(run)
        self._busy = busy
        self._run_state = run
        self._approvals = approvals
        self._held = gate.held
        self._status = status
        self._budget = budget
        self._continuation = continuation
        self._goals = GoalLoop(run, gate, runner, continuation, status, budget, busy)
        # The task's delta stream (Workflow Streams): handlers only, no command (noeta.workflows.streams).
        self._stream = TaskStream(run.state)

    # -- handlers -------------------------------------------------------------------------------

    # A task that fails mid-goal fails its waiting send_goal callers too: nothing is lost by abandoning.
    @workflow.update(
        name=UPDATE_SEND_GOAL,
        unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON,
        description='The next goal of a keep_open task: {"goal": "..."}; answers with its result.',
    )
    async def send_goal(self, goal: GoalInput) -> TaskResult:
        """The next goal of a multi-turn task (or, sent ``if_busy``, a message for the running
        one: noeta.workflows.busy); returns the result of the goal that answered it."""
        index = self._busy.accept(goal)
        await workflow.wait_condition(lambda: self._busy.answered(index))
        result = self._busy.result(index)
        assert result is not None
        return result

    @send_goal.validator
    def _validate_goal(self, goal: GoalInput) -> None:
        check_goal(self._run_state.state, self._run_state.task.keep_open, goal)
        self._busy.check(goal)

    @workflow.update(
        name=UPDATE_APPROVE,
        description='Answer an action waiting for approval: {"call_id": "c1", "approved": true, '
        '"reason": "...", "arguments": {...}} (approved false refuses it; arguments replace a tool '
        "call's). The approver recorded is your Temporal identity.",
    )
    def approve(self, decision: ApprovalInput) -> None:
        """A human's answer to an action that a guard sent for approval."""
        self._approvals.answer(decision)

    @approve.validator
    def _validate_approval(self, decision: ApprovalInput) -> None:
        self._approvals.check_answer(decision)

    @workflow.update(
        name=UPDATE_REFUSE,
        description='Refuse an action waiting for approval: {"call_id": "c1", "reason": "..."}. '
        "The approver recorded is your Temporal identity.",
    )
    def refuse(self, decision: ApprovalInput) -> None:
        """A human's refusal of an action that a guard sent for approval (whatever ``approved`` says)."""
        self._approvals.answer(dataclasses.replace(decision, approved=False))

    @refuse.validator
    def _validate_refusal(self, decision: ApprovalInput) -> None:
        self._approvals.check_answer(dataclasses.replace(decision, approved=False))

    @workflow.query(name=QUERY_PENDING_APPROVALS, description="Actions waiting for a human's approval.")
    def pending_approvals(self) -> list[ApprovalRequest]:
        """The actions waiting for a human's approval."""
        return list(self._approvals.pending.values())

    @workflow.update(
        name=UPDATE_ELICITATION_HELD,
        description="Sent by the task's own MCP tool call: its server asked a person and the call holds the request open.",
    )
    def elicitation_held(self, asked: HeldQuestion) -> None:
        """List a question the server of a running call asked (noeta.workflows.held_questions)."""
        self._held.hold(asked)

    @elicitation_held.validator
    def _validate_held(self, asked: HeldQuestion) -> None:
        self._held.check(asked)

    @workflow.query(name=QUERY_ELICITATION_ANSWER, description="The answer to a held MCP server's question, once given.")
    def elicitation_answer(self, call_id: str) -> HeldAnswer:
        """What the call holding question ``call_id`` returns to its server."""
        return self._held.answer(call_id)

    @workflow.signal(name=SIGNAL_INJECT, description='Context for the next step: {"text": "...", "origin": "system"}.')
    def inject(self, message: InjectInput) -> None:
        """Host context (origin "system" or "memory") for the model's next step."""
        queue_injection(self._run_state.state.injections, message)

    @workflow.signal(name=SIGNAL_CLOSE, description="Let a keep_open task end after its queued goals.")
    def close(self) -> None:
        """End a keep-open task once queued goals are done."""
        self._run_state.state.closed = True

    @workflow.signal(name=SIGNAL_STORE_OUTAGE, description="Sent by the task's own step while the content store fails.")
    def store_outage(self, text: str) -> None:
        """Show in Current Details that the current step waits for the content store (no command:
        a task's history and commands are the same with or without it)."""
        self._status.outage(text)

    @workflow.query(name=QUERY_PROGRESS, description="Turns, messages, usage and goals done so far.")
    def progress(self) -> dict[str, Any]:
        """Turns, messages, usage, call counts and goals done so far."""
        run = self._run_state
        return {
            "turns": run.state.total_turns,
            "messages": len(run.transcript),
            "usage": run.state.usage,
            "counts": run.state.counts,
            "goals_done": len(run.state.recent_results),
        }

    # -- the task's life: its goals, then its resources go -----------------------------------------

    @workflow.run
    async def run(self, task: TaskInput) -> TaskResult:
        """Run the task's goals until it ends, then release its resources; returns the last goal's
        result. Settings out of range fail the task with ConfigurationError before any step."""
        # Input that reached Temporal without Options' checks fails the task, typed, before any
        # step; left unchecked it could fail every workflow task forever (timedelta(nan)...).
        problem = settings_problem(task)
        if problem is not None:
            raise ApplicationError(problem, {"message": problem}, type=ConfigurationError.__name__, non_retryable=True)
        self._busy.bind_main_task()
        try:
            result = await self._run_indexed(task)
        except (Exception, asyncio.CancelledError):  # not continue-as-new or eviction (BaseException)
            await self._release_resources()
            raise
        await score_ended_task(task)  # tasks without Options.scoring: no command
        await self._release_resources()
        return result

    async def _release_resources(self) -> None:
        """The task ends: its task-scoped resources go, whatever the outcome (also on cancel)."""
        owned = self._run_state.state.owned_resources
        if owned and not self._continuation.continuing:
            keys = [r.key for r in owned]
            await steps.release_resources(self._run_state.task, ReleaseInput(workflow.info().workflow_id, keys))

    async def _run_indexed(self, task: TaskInput) -> TaskResult:
        """Run the task; a cancellation or failure is the task's status in its search attributes."""
        try:
            return await self._run_goals(task)
        except asyncio.CancelledError:
            self._status.update_index("cancelled")
            raise
        except (ActivityError, ChildWorkflowError) as err:
            if isinstance(err.cause, CancelledError):
                self._status.update_index("cancelled")
                raise asyncio.CancelledError(str(err.cause)) from err
            self._status.update_index("failed")
            raise
        except ApplicationError as err:
            self._status.update_index("failed")
            failure = with_spend(err, spend_of(self._run_state.state)) if self._budget is not None else err
            if failure is not err:  # a parent adds a failed sub-agent's spend to its own
                raise failure from err
            raise

    async def _run_goal(
        self, policy: Policy, ctx: StepContext, goal: GoalInput | None, index: int, forked_turns: int | None
    ) -> TaskResult:
        """Goal ``index``'s result: as its loop ends it, or ``interrupted`` by a newer goal."""
        busy = self._busy
        busy.goal_running = True
        try:
            result = await self._goals.run_goal(policy, ctx, goal, index, forked_turns=forked_turns)
        except asyncio.CancelledError:
            if not busy.interrupted():
                raise
            result = self._goals.interrupted(index)
        finally:
            busy.goal_running = False
        busy.goal_ended()  # not on continue-as-new: the carry hands unread steering on as it is
        return result

    async def _run_goals(self, task: TaskInput) -> TaskResult:
        """Prepare the task (or resume it), then run its goals: the first, and for a keep_open
        task each one sent until it is closed; continue as new while idle when history is long."""
        info = workflow.info()
        run, status, continuation = self._run_state, self._status, self._continuation
        state = run.state
        policy = load_policy(task.policy)
        resumed = task.carry is not None
        forked = task.fork is not None and not resumed
        if resumed:
            await continuation.restore()
        else:
            run.prepared(await steps.prepare(task), task.trace_id or info.workflow_id)
            if task.fork is not None:  # only forked tasks take this step: other histories replay as before
                await start_from_fork(run, task.fork)
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
        index = state.goal_index
        # A fork's first goal is its source's, already in the transcript it starts from.
        goal: GoalInput | None = None if resumed or forked else GoalInput(goal=task.goal, images=task.images)
        forked_turns = task.fork.goal_turns if forked and task.fork is not None else None
        resuming_idle = resumed and not state.in_goal  # its result came in the carry
        results = state.recent_results
        while True:
            if not resuming_idle:
                results[index] = await self._run_goal(policy, ctx, goal, index, forked_turns)
            resuming_idle, forked_turns = False, None
            if not task.keep_open:
                status.update_index(ended_as(results[index].status))
                return results[index]
            if not state.goal_queue:
                status.update_index("idle")
                status.show(details.idle(len(results)))
            moving = await upgrades.wait_idle(lambda: bool(state.goal_queue) or state.closed or continuation.due())
            if not state.closed and (not state.goal_queue or moving):
                continuation.hand_over(index, in_goal=False)  # queued goals travel in the carry
            if not state.goal_queue:
                await workflow.wait_condition(workflow.all_handlers_finished)
                status.update_index(ended_as(results[index].status))
                return results[index]
            index, goal = state.goal_queue.pop(0)
            state.goal_index = index
            status.update_index("running")
