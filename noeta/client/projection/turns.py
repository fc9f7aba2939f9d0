"""A task's model turns read back from its history: each turn's recorded request (what the
workflow sent to ``call_model``) and the response it got, numbered as the workflow numbers them
(see :mod:`noeta.protocols.turns`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.payloads import decode_first
from noeta.client.projection.steps import LOCAL_ACTIVITY_MARKER
from noeta.protocols.activity_io import CallModelInput, CallModelOutput, PrepareOutput
from noeta.protocols.messages import LLMResponse
from noeta.protocols.names import CALL_MODEL, PREPARE_TASK
from noeta.protocols.task import TaskInput
from noeta.protocols.tool import ToolSpec
from noeta.protocols.turns import TurnDecision, decision_of


@dataclass(frozen=True)
class RecordedTurn:
    """One model turn as history recorded it."""

    number: int
    """The task-wide turn number (``CallModelInput.turn``)."""
    run: int
    """The run it happened in (0: the first; one more after each continue-as-new)."""
    request: CallModelInput
    """What the workflow asked ``call_model`` for: the stored transcript's head, the messages added
    since, the references of the system prompt and schemas, the tools offered."""
    response: LLMResponse
    """What the model answered (without its raw form)."""

    @property
    def decision(self) -> TurnDecision:
        """The model's decision in this turn."""
        return decision_of(self.response.content)


@dataclass(frozen=True)
class RecordedTask:
    """What a task's history says about its model turns."""

    task: TaskInput | None
    """The first run's input: the task's settings as started (None: no start event)."""
    turns: list[RecordedTurn] = field(default_factory=list)
    """The turns whose model call finished, in order."""
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    """The worker tools the task was given, by name, as prepare (or a continued run's carry)
    recorded them."""


def recorded_turns(runs: Sequence[Iterable[HistoryEvent]]) -> RecordedTask:
    """Read the model turns out of a task's runs (each run's history events, in order)."""
    first: TaskInput | None = None
    turns: list[RecordedTurn] = []
    tools: dict[str, ToolSpec] = {}
    E = EventType
    for run, events in enumerate(runs):
        scheduled: dict[int, CallModelInput | None] = {}  # event ids start over in every run
        for event in events:
            t = event.event_type
            if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                task: TaskInput | None = decode_first(event.workflow_execution_started_event_attributes.input, TaskInput)
                if task is not None and task.carry is not None:
                    tools.update((s.name, s) for s in task.carry.tools)
                first = first if first is not None else task
            elif t == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attrs = event.activity_task_scheduled_event_attributes
                if attrs.activity_type.name == CALL_MODEL:
                    scheduled[event.event_id] = decode_first(attrs.input, CallModelInput)
                elif attrs.activity_type.name == PREPARE_TASK:  # before prepare became a local activity
                    scheduled[event.event_id] = None
            elif t == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                done = event.activity_task_completed_event_attributes
                if done.scheduled_event_id not in scheduled:
                    continue
                request = scheduled[done.scheduled_event_id]
                if request is None:
                    plan: PrepareOutput = decode_first(done.result, PrepareOutput)
                    tools.update((s.name, s) for s in plan.tools)
                else:
                    out: CallModelOutput = decode_first(done.result, CallModelOutput)
                    turns.append(RecordedTurn(request.turn, run, request, out.response))
            elif t == E.EVENT_TYPE_MARKER_RECORDED:
                prepared = _prepared(event)
                if prepared is not None:
                    tools.update((s.name, s) for s in prepared.tools)
    return RecordedTask(first, turns, tools)


def _prepared(event: HistoryEvent) -> PrepareOutput | None:
    """prepare_task's output, recorded as a local activity's marker."""
    attrs = event.marker_recorded_event_attributes
    if attrs.marker_name != LOCAL_ACTIVITY_MARKER or "result" not in attrs.details:
        return None
    data = json.loads(attrs.details["data"].payloads[0].data)
    if data.get("activity_type") != PREPARE_TASK:
        return None
    prepared: PrepareOutput = decode_first(attrs.details["result"], PrepareOutput)
    return prepared
