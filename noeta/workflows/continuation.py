"""Continue-as-new: when a run hands the task over to a fresh run, what it hands on, and how the
next run gets its transcript back."""

from __future__ import annotations

import dataclasses
from typing import NoReturn

from temporalio import workflow

from noeta.protocols.task import LoadTranscriptInput
from noeta.workflows import steps, upgrades
from noeta.workflows.approvals import Approvals
from noeta.workflows.goals import recent
from noeta.workflows.run import RunState


class Continuation:
    """The hand-over of one run to the next: the task's id, trace and resources stay; the run's
    Carry travels, trimmed, in the next run's TaskInput."""

    def __init__(self, run: RunState, approvals: Approvals) -> None:
        """Hands ``run`` over to the next run when its history is long; pending ``approvals`` hold
        the hand-over back."""
        self._run = run
        self._approvals = approvals
        self.continuing = False
        """Set once this run continues as new: the task goes on, so its resources stay."""

    def due(self) -> bool:
        """Whether to continue as new now: history is long, and this is a safe point (no
        approval pending)."""
        info = workflow.info()
        limit = self._run.task.max_history_events
        suggested = info.is_continue_as_new_suggested() or (
            limit is not None and info.get_current_history_length() >= limit
        )
        # send_goal callers still waiting are abandoned here and re-send their goal_id to the next
        # run (AsyncClient.send_goal does), so they do not hold the task in an ever-growing run.
        return suggested and not self._approvals.pending

    def hand_over(self, index: int, in_goal: bool) -> NoReturn:
        """Continue as new at goal ``index`` (``in_goal``: that goal is still being worked on)."""
        task, state = self._run.task, self._run.state
        # Enough of the goals' bookkeeping to answer callers that follow their goal; bounded.
        results, goal_ids = recent(state.recent_results, state.goal_ids, index)
        carry = dataclasses.replace(
            state,
            goal_index=index,
            in_goal=in_goal,
            recent_results=results,
            goal_ids=goal_ids,
            runs=(state.runs + 1) if task.carry else 1,
        )
        # Channels are already composed into the carried refs; dropping them keeps the input small.
        self.continuing = True
        # A versioned task's next run starts on its deployment's target version (noeta.workflows.upgrades).
        workflow.continue_as_new(
            dataclasses.replace(task, carry=carry, channels=[]), initial_versioning_behavior=upgrades.on_continue()
        )

    async def restore(self) -> None:
        """A continued run's first step: the stored transcript, then what was pending for the next
        model call."""
        run = self._run
        state = run.state
        loaded = await steps.load_transcript(run.task, LoadTranscriptInput(head=state.head), state.runs + 1)
        run.transcript = [*loaded.messages, *state.pending]
