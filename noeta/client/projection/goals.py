"""A task's goals: the first from its input, further ones through ``send_goal``, taken one at a time;
a goal sent ``if_busy`` "interrupt" or "steer" while one runs as noeta.workflows.busy takes it."""

from __future__ import annotations

from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.transcript import Transcript
from noeta.protocols import event_log as ev
from noeta.protocols.appends import goal_message
from noeta.protocols.messages import Message
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
        self._steering: list[tuple[GoalInput, int]] = []  # waiting to join the running goal
        self._goal_ids: set[str] = set()
        self._rejected = 0  # answers of the running goal its validation rejected

    def first_goal(self, goal_id: str) -> None:
        """The task's first goal has this id (``Client.send``): the update that carries it follows
        that goal, as in the workflow (noeta.workflows.run.starting_carry)."""
        if goal_id:
            self._goal_ids.add(goal_id)

    def received(self, goal: GoalInput, event: HistoryEvent) -> None:
        """A ``send_goal`` update was accepted."""
        if goal.goal_id:
            if goal.goal_id in self._goal_ids:
                return  # its caller following it into a new run (see AsyncClient.send_goal)
            self._goal_ids.add(goal.goal_id)
        seq = self._log.emit(ev.GoalReceived(goal=goal.goal), "human", event, None, "human")
        if self._running and goal.if_busy == "steer":
            self._steering.append((goal, seq))
        elif self._running and goal.if_busy == "interrupt":  # after the interrupting goals waiting
            front = next((i for i, (g, _) in enumerate(self._waiting) if g.if_busy != "interrupt"), len(self._waiting))
            self._waiting.insert(front, (goal, seq))
        else:
            self._waiting.append((goal, seq))
        if not self._running:
            self._begin_next(event)

    def steered(self, messages: list[Message], event: HistoryEvent) -> None:
        """Steering messages joined the running goal (memo STEERED_MEMO_KEY), in the order sent."""
        for message in messages:
            goal, cause = self._steering.pop(0)
            seq = self._log.emit(ev.GoalSteered(goal=goal.goal), "human", event, cause, "human")
            self._transcript.append([message], "human", event, seq)

    def ended(self, event: HistoryEvent) -> None:
        """The running goal's result was recorded: steering messages it did not take wait first,
        then the next waiting goal, if any, begins."""
        self._running = False
        self._waiting[0:0] = self._steering
        self._steering.clear()
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
