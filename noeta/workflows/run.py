"""What one run of AgentWorkflow holds, and how it hands over to the next run (continue-as-new).

The workflow's behaviours are split by idea — the loop and its handlers (agent.py), guards and
approvals (gates.py), the steps it schedules (actions.py) — over one class hierarchy that shares
this state: Temporal binds a workflow's handlers and state to one instance.
"""

from __future__ import annotations

import dataclasses
from typing import NoReturn

from temporalio import workflow

from noeta.protocols.messages import Message
from noeta.protocols.statuses import TaskStatus
from noeta.protocols.step_context import StepContext
from noeta.protocols.task import (
    Carry,
    LoadTranscriptInput,
    TaskInput,
)
from noeta.protocols.tool import ToolSpec
from noeta.workflows import details, steps
from noeta.workflows.approvals import Approvals
from noeta.workflows.budget import Budget
from noeta.workflows.goals import recent
from noeta.workflows.index import SearchIndex


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


class AgentRun:
    """The state of one run (declared once here; set in AgentWorkflow's ``__init__``)."""

    _task: TaskInput
    _state: Carry
    _transcript: list[Message]
    """The stored transcript (loaded on resume) plus what is pending for the next model call."""
    _tools: dict[str, ToolSpec]
    _approvals: Approvals
    _index: SearchIndex
    _budget: Budget | None
    _finish_refusals: int
    """Refused finishes in the current goal (and run)."""
    _last_refusal: str
    _ctx: StepContext | None
    _continuing: bool
    """Continue-as-new: the task goes on, its resources stay."""
    _details: details.CurrentDetails
    """The UI's "Current Details" (not in history)."""
    _tool_calls: int
    """Tool calls scheduled by this run: numbers their idempotency keys."""

    def _append(self, message: Message) -> None:
        self._transcript.append(message)
        self._state.pending.append(message)

    def _update_index(self, status: TaskStatus | None = None) -> None:
        # The resolved model rides on upserts that happen anyway (no extra history event).
        model = self._state.model if self._task.model is None else None
        self._index.update(self._state.total_turns, self._state.usage, status, model=model)

    def _show(self, text: str) -> None:
        self._details.doing(text, self._approvals.pending, self._task.approval_timeout_seconds)


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

