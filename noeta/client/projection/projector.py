"""Workflow history -> EventEnvelopes. A pure function: the same history gives the same stream.

The history is the only event store. Each AgentWorkflow history event that means something to the
agent becomes one or more envelopes; ``seq`` is assigned in projection order, gap-free from 1 and
continuing across the runs of one task.
"""

from __future__ import annotations

import dataclasses

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.approvals import Approvals
from noeta.client.projection.goals import Goals
from noeta.client.projection.lifecycle import Lifecycle
from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.payloads import decode_first
from noeta.client.projection.rounds import ToolRounds
from noeta.client.projection.stalls import stall_of
from noeta.client.projection.steps import Steps
from noeta.client.projection.subtasks import Subtasks
from noeta.client.projection.transcript import Transcript
from noeta.protocols import event_log as ev
from noeta.protocols.held_questions import HeldQuestion
from noeta.protocols.names import UPDATE_APPROVE, UPDATE_ELICITATION_HELD, UPDATE_REFUSE, UPDATE_SEND_GOAL
from noeta.protocols.task import ApprovalInput, GoalInput

_CHILD_ENDED = (
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
)


class Projector:
    """Incremental projection: feed history events in order, get the new envelopes back.

    Built from one object per idea, each holding its own state: the envelope log, the transcript,
    tool rounds, goals, approvals, sub-agents, steps and the task's lifecycle. The projector only
    routes each history event to the one that reads it.
    """

    def __init__(self, task_id: str = "") -> None:
        """``task_id`` is put on every envelope."""
        self._log = EnvelopeLog(task_id)
        transcript = Transcript(self._log)
        rounds = ToolRounds(transcript)
        self._rounds = rounds
        self._goals = Goals(self._log, transcript)
        self._approvals = Approvals(self._log, transcript)
        self._subtasks = Subtasks(self._log, transcript)
        self._steps = Steps(self._log, transcript, rounds, self._goals, self._approvals)
        self._lifecycle = Lifecycle(self._log, transcript, rounds, self._goals)
        E = EventType
        #: The part that reads each type of history event; any other type may end the run (lifecycle).
        self._routes: dict[EventType.ValueType, Callable[[HistoryEvent], None]] = {
            E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: self._started,
            E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: self._steps.scheduled,
            E.EVENT_TYPE_ACTIVITY_TASK_STARTED: self._steps.attempt_started,
            E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: self._steps.completed,
            E.EVENT_TYPE_ACTIVITY_TASK_FAILED: self._steps.failed,
            E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: self._steps.failed,
            E.EVENT_TYPE_MARKER_RECORDED: self._steps.local_activity,
            E.EVENT_TYPE_TIMER_STARTED: self._approvals.timer_started,
            E.EVENT_TYPE_TIMER_FIRED: self._approvals.timer_fired,
            E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: self._update_accepted,
            E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: self._lifecycle.memo,
            E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: self._subtasks.initiated,
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED: self._subtasks.completed,
            **dict.fromkeys(_CHILD_ENDED, self._subtasks.ended),
            E.EVENT_TYPE_WORKFLOW_TASK_FAILED: self._workflow_task_failed,
        }

    @property
    def envelopes(self) -> list[ev.EventEnvelope]:
        """Every envelope projected so far."""
        return self._log.envelopes

    def begin_run(self) -> None:
        """A new run of the task starts (continue-as-new): ids in its history start over."""
        self._steps.begin_run()
        self._subtasks.begin_run()

    def feed(self, event: HistoryEvent) -> list[ev.EventEnvelope]:
        """Project one history event; returns the envelopes it added."""
        before = len(self._log.envelopes)
        if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
            self._rounds.settle()  # a local tool's round ends with its workflow task's markers
        self._route(event)
        return self._log.envelopes[before:]

    def settle(self) -> list[ev.EventEnvelope]:
        """The end of the history fed so far: what waited for the rest of its workflow task (a
        round of local tool calls whose markers ended it) is projected; returns what it added."""
        before = len(self._log.envelopes)
        self._rounds.settle()
        return self._log.envelopes[before:]

    def _route(self, event: HistoryEvent) -> None:
        self._routes.get(event.event_type, self._lifecycle.closed)(event)

    def _started(self, event: HistoryEvent) -> None:
        self._steps.run_started(self._lifecycle.started(event))

    def _workflow_task_failed(self, event: HistoryEvent) -> None:
        stall = stall_of(event)
        if stall is not None:
            self._log.emit(stall, "engine", event, None)

    def _update_accepted(self, event: HistoryEvent) -> None:
        accepted = event.workflow_execution_update_accepted_event_attributes.accepted_request
        request = accepted.input
        if request.name == UPDATE_APPROVE:
            self._approvals.decided(decode_first(request.args, ApprovalInput), event, accepted.meta.identity)
        elif request.name == UPDATE_REFUSE:
            refused = dataclasses.replace(decode_first(request.args, ApprovalInput), approved=False)
            self._approvals.decided(refused, event, accepted.meta.identity)
        elif request.name == UPDATE_SEND_GOAL:
            self._goals.received(decode_first(request.args, GoalInput), event)
        elif request.name == UPDATE_ELICITATION_HELD:
            self._steps.held_question(decode_first(request.args, HeldQuestion), event)


def project(
    history: Iterable[HistoryEvent] | Sequence[Iterable[HistoryEvent]], task_id: str = ""
) -> list[ev.EventEnvelope]:
    """Project the history of a task (one run, or its runs in order) into envelopes."""
    items: list[Any] = list(history)
    # One run's events, or a list of runs: the first item tells which.
    runs: list[Iterable[HistoryEvent]] = [items] if not items or isinstance(items[0], HistoryEvent) else items
    projector = Projector(task_id=task_id)
    for run in runs:
        projector.begin_run()
        for event in run:
            projector.feed(event)
    projector.settle()
    return projector.envelopes
