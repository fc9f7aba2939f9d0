"""Goals sent while another goal runs (``send_goal(if_busy=...)``): queued behind it (the default),
refused, interrupting it, or steering it.

- ``reject``: the update's validator refuses the goal, so nothing enters history.
- ``interrupt``: the goal goes to the front of the queue and the workflow's main task is cancelled
  where it waits (a model call, a tool round, an approval, a sub-agent): Temporal cancels what that
  step scheduled, and the goal's runner catches that cancellation — only that one: a cancellation
  of the task itself goes on — and ends the goal as ``interrupted``.
- ``steer``: the message waits for the running goal's next step and joins its transcript as the
  user's words (recorded in the memo, STEERED_MEMO_KEY); one the goal ends without taking becomes
  the next goal, so no message is lost. Its caller gets the result of the goal it joined.

A task that never receives such a goal issues exactly the commands it did before, so recorded
histories replay unchanged. The projection mirrors these rules (noeta.client.projection.goals).
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from noeta.errors import TaskBusyError, TaskNotFoundError
from noeta.protocols.appends import goal_message
from noeta.protocols.interaction import GoalInput, TaskResult
from noeta.protocols.messages import Message
from noeta.protocols.names import DEFAULT_TENANT, STEERED_MEMO_KEY
from noeta.temporal.search_attributes import TENANT
from noeta.workflows.goals import accept_goal, next_index
from noeta.workflows.run import RunState


class BusyGoals:
    """Where a goal goes when the task is working on another, and whose result answers it."""

    def __init__(self, run: RunState) -> None:
        """Reads and changes ``run``'s goal bookkeeping (its Carry)."""
        self._run = run
        self.goal_running = False
        """A goal's decide loop runs (the main task waits inside it)."""
        self._main: asyncio.Task[object] | None = None
        self._interrupts = 0  # cancellations of the main task asked here and not yet taken

    def bind_main_task(self) -> None:
        """Remember the workflow's main task (call it from ``run``): an interrupt cancels it."""
        self._main = asyncio.current_task()

    def check(self, goal: GoalInput) -> None:
        """The validator's part: a goal for another tenant's task is refused as if the task did not
        exist (TaskNotFoundError); ``reject`` while busy refuses the goal (TaskBusyError)."""
        info = workflow.info()
        if goal.tenant is not None and goal.tenant != (info.typed_search_attributes.get(TENANT) or DEFAULT_TENANT):
            raise ApplicationError(f"no task {info.workflow_id!r}", type=TaskNotFoundError.__name__)
        state = self._run.state
        if goal.if_busy == "reject" and (self.goal_running or state.goal_queue) and goal.goal_id not in state.goal_ids:
            raise ApplicationError(
                "the task is working on another goal; nothing was sent (send it later, or with if_busy="
                '"enqueue", "interrupt" or "steer")',
                type=TaskBusyError.__name__,
            )

    def accept(self, goal: GoalInput) -> int:
        """Take ``goal`` in; returns the index whose result answers its caller (see ``result``)."""
        state = self._run.state
        known = bool(goal.goal_id) and goal.goal_id in state.goal_ids
        if known or not self.goal_running or goal.if_busy not in ("interrupt", "steer"):
            return accept_goal(state, goal)
        index = next_index(state, goal)
        if goal.if_busy == "steer":
            state.steering.append((index, goal))
        else:  # after the interrupting goals still waiting, before every other queued goal
            front = next((i for i, (_, g) in enumerate(state.goal_queue) if g.if_busy != "interrupt"), len(state.goal_queue))
            state.goal_queue.insert(front, (index, goal))
            if self._main is not None:
                self._interrupts += 1
                self._main.cancel()
        return index

    def answered(self, index: int) -> bool:
        """Whether the caller of goal ``index`` has its result."""
        return self.result(index) is not None

    def result(self, index: int) -> TaskResult | None:
        """The result for the caller of goal ``index``: its own, or that of the goal it steered."""
        state = self._run.state
        own = state.recent_results.get(index)
        joined = state.steered_into.get(index)
        return own if own is not None or joined is None else state.recent_results.get(joined)

    def interrupted(self) -> bool:
        """After the goal loop was cancelled: whether by interrupts alone (the goal ends as
        interrupted and the task goes on), not by the task's own cancellation (which goes on)."""
        if not self._interrupts:
            return False
        main = asyncio.current_task()
        assert main is not None
        for _ in range(self._interrupts):
            main.uncancel()
        self._interrupts = 0
        return main.cancelling() == 0

    def take_steering(self) -> list[Message]:
        """The steering messages waiting: they join the running goal's transcript now (and the
        memo records at which step)."""
        state = self._run.state
        if not state.steering:
            return []
        messages = []
        for index, goal in state.steering:
            message = goal_message(goal.goal, goal.images)
            self._run.append(message)
            messages.append(message)
            state.steered_into[index] = state.goal_index
        state.steering.clear()
        workflow.upsert_memo({STEERED_MEMO_KEY: messages})
        return messages

    def goal_ended(self) -> None:
        """The running goal ended: steering messages it did not take become the next goals."""
        state = self._run.state
        if state.steering:
            state.goal_queue[0:0] = state.steering
            state.steering.clear()


__all__ = ["BusyGoals"]
