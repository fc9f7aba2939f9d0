"""The goals of a keep-open task: accepted in order through ``send_goal``, each answered by its result."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from noeta.errors import ConfigurationError, PayloadTooLargeError, TaskNotOpenError
from noeta.protocols.task import MAX_GOAL_BYTES, Carry, GoalInput, TaskResult

#: Goal ids and results a run hands to the next, so callers following a goal can still be answered.
CARRIED_GOALS = 20


def check_goal(state: Carry, keep_open: bool, goal: GoalInput) -> None:
    """The ``send_goal`` update's validator: a refused goal never enters history."""
    if goal.goal_id and goal.goal_id in state.goal_ids:
        return  # a caller following its goal into this run
    if not keep_open:
        raise ApplicationError("task was not started with keep_open=True", type=TaskNotOpenError.__name__)
    if state.closed:
        raise ApplicationError("task is closed", type=TaskNotOpenError.__name__)
    if not goal.goal.strip():
        raise ApplicationError("goal is empty", type=ConfigurationError.__name__)
    if len(goal.goal.encode()) > MAX_GOAL_BYTES:
        raise ApplicationError(f"goal is over {MAX_GOAL_BYTES} bytes", type=PayloadTooLargeError.__name__)


def accept_goal(state: Carry, goal: GoalInput) -> int:
    """The goal's index: a goal_id seen before (the client retrying after the task continued as
    new) is not queued again."""
    index = state.goal_ids.get(goal.goal_id) if goal.goal_id else None
    if index is None:
        index = next_index(state, goal)
        state.goal_queue.append((index, goal))
    return index


def next_index(state: Carry, goal: GoalInput) -> int:
    """Number a goal just received (and remember its goal_id, so its caller can follow it)."""
    index = state.goals_received
    state.goals_received += 1
    if goal.goal_id:
        state.goal_ids[goal.goal_id] = index
    return index


def recent(results: dict[int, TaskResult], ids: dict[str, int], index: int) -> tuple[dict[int, TaskResult], dict[str, int]]:
    """What of the goals' bookkeeping a continued run needs: the last CARRIED_GOALS."""
    return (
        {i: r for i, r in results.items() if i >= index - CARRIED_GOALS},
        {g: i for g, i in ids.items() if i >= index - CARRIED_GOALS},
    )
