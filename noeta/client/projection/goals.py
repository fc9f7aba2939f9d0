"""A task's goals: the first from its input, further ones through ``send_goal``, taken one at a time."""

from __future__ import annotations

from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.transcript import Transcript
from noeta.protocols import event_log as ev
from noeta.protocols.appends import goal_message
from noeta.protocols.task import GoalInput


class Goals:
    """Which goal is running and which wait. The workflow takes goals in order: one accepted while
    another runs enters the transcript when the running one ends (mirrors AgentWorkflow)."""

    def __init__(self, log: EnvelopeLog, transcript: Transcript) -> None:
        """Records into ``log``; causes come from ``transcript``."""
        self._log = log
        self._transcript = transcript
        self._running = True  # the task's own goal, from its start
        self._waiting: list[tuple[GoalInput, int]] = []  # with the seq of its GoalReceived
        self._goal_ids: set[str] = set()
        self._rejected = 0  # answers of the running goal its validation rejected

    def received(self, goal: GoalInput, event: HistoryEvent) -> None:
        """A ``send_goal`` update was accepted."""
        if goal.goal_id:
            if goal.goal_id in self._goal_ids:
                return  # its caller following it into a new run (see AsyncClient.send_goal)
            self._goal_ids.add(goal.goal_id)
        seq = self._log.emit(ev.GoalReceived(goal=goal.goal), "human", event, None, "human")
        self._waiting.append((goal, seq))
        if not self._running:
            self._begin_next(event)

    def ended(self, event: HistoryEvent) -> None:
        """The running goal's result was recorded: the next waiting goal, if any, begins."""
        self._running = False
        if self._waiting:
            self._begin_next(event)

    def answer_rejected(self) -> int:
        """Count a rejected answer of the running goal; returns how many it has had."""
        self._rejected += 1
        return self._rejected

    def _begin_next(self, event: HistoryEvent) -> None:
        goal, cause = self._waiting.pop(0)
        self._transcript.append([goal_message(goal.goal, goal.images)], "human", event, cause)
        self._running = True
        self._rejected = 0
