"""The projected transcript is the transcript the model saw, for every recorded history.

What the model saw is recorded by the workflow itself: each model call's input carries the
messages appended since the previous call (a call made again on a fallback provider carries the
same ones) (``CallModelInput.append``, the same list the worker adds
to the stored transcript chain), and its result the assistant's message. The projection builds its
MessagesAppended from other events (goals, tool results, sub-agents, memories, feedback); both sides
use noeta.protocols.appends, and this test holds them to each other. (A task with local model calls
records no call's input: for it, the answers are compared.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from noeta.client.projection import decode_first, project
from noeta.temporal.converter import type_adapter
from noeta.protocols import event_log as ev
from noeta.protocols.messages import Message
from noeta.protocols.names import CALL_MODEL
from noeta.protocols.task import CallModelInput, CallModelOutput
from tests.test_replay import ROOT, load

SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
COMPLETED = EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
MARKER = EventType.EVENT_TYPE_MARKER_RECORDED


def tasks() -> dict[str, list[Path]]:
    """Each recorded task's runs, in order (``name.json`` or ``name.run1.json``, ``name.run2.json``...)."""
    grouped: dict[str, list[Path]] = {}
    for path in sorted(ROOT.glob("**/*.json")):
        grouped.setdefault(str(path.relative_to(ROOT).parent / path.stem.split(".")[0]), []).append(path)
    return {name: sorted(paths, key=lambda p: int(p.stem.split(".run")[-1]) if ".run" in p.stem else 0)
            for name, paths in grouped.items()}


TASKS = tasks()


def seen_by_model(runs: list[WorkflowHistory]) -> list[Message]:
    """The transcript as the model calls recorded it: each call's appended messages, then its answer."""
    messages: list[Message] = []
    for run in runs:
        model_calls: set[int] = set()  # event ids count from 1 in every run
        previous: CallModelInput | None = None
        for event in run.events:
            if event.event_type == SCHEDULED and event.activity_task_scheduled_event_attributes.activity_type.name == CALL_MODEL:
                call: CallModelInput = decode_first(event.activity_task_scheduled_event_attributes.input, CallModelInput)
                if call.sampling is not None:  # an MCP server's request: its transcript is not the task's
                    continue
                # The same call made again (on a fallback provider after it failed): its messages once.
                if previous is None or (call.head, call.append) != (previous.head, previous.append):
                    messages.extend(call.append)
                previous = call
                model_calls.add(event.event_id)
            elif event.event_type == COMPLETED and event.activity_task_completed_event_attributes.scheduled_event_id in model_calls:
                out: CallModelOutput = decode_first(event.activity_task_completed_event_attributes.result, CallModelOutput)
                messages.append(Message(role="assistant", content=out.response.content))
    return messages


def projected(runs: list[WorkflowHistory]) -> list[Message]:
    envelopes = project([run.events for run in runs])
    return [m for e in envelopes if isinstance(e.payload, ev.MessagesAppended) for m in e.payload.messages]


def as_json(messages: list[Message]) -> list[object]:
    return [type_adapter(Message).dump_python(m, mode="json") for m in messages]


def local_model_answers(runs: list[WorkflowHistory]) -> list[Message] | None:
    """The answers of a task with local model calls (``model_local_activity``), in order, from their
    markers and activities; None for a task without any. A local call's marker holds no input, so
    what such a task's model was sent is not in its history: only its answers can be compared."""
    answers: list[Message] = []
    local = False
    for run in runs:
        model_calls: set[int] = set()
        for event in run.events:
            if event.event_type == SCHEDULED and event.activity_task_scheduled_event_attributes.activity_type.name == CALL_MODEL:
                if decode_first(event.activity_task_scheduled_event_attributes.input, CallModelInput).sampling is None:
                    model_calls.add(event.event_id)
            elif event.event_type == COMPLETED and event.activity_task_completed_event_attributes.scheduled_event_id in model_calls:
                out: CallModelOutput = decode_first(event.activity_task_completed_event_attributes.result, CallModelOutput)
                answers.append(Message(role="assistant", content=out.response.content))
            elif event.event_type == MARKER and "result" in event.marker_recorded_event_attributes.details:
                details = event.marker_recorded_event_attributes.details
                if CALL_MODEL.encode() in details["data"].payloads[0].data:
                    local = True
                    out = decode_first(details["result"], CallModelOutput)
                    answers.append(Message(role="assistant", content=out.response.content))
    return answers if local else None


@pytest.mark.parametrize("name", sorted(TASKS))
def test_projected_transcript_is_what_the_model_saw(name: str):
    runs = [load(path) for path in TASKS[name]]
    answers = local_model_answers(runs)
    if answers is not None:
        shown_answers = [m for m in projected(runs) if m.role == "assistant"]
        assert answers and as_json(shown_answers) == as_json(answers)
        return
    model_view = seen_by_model(runs)
    shown = projected(runs)
    # After the last model call the projection may show more (a final tool round, feedback): the
    # model never saw those. Everything up to there must be the same, message for message.
    assert as_json(shown[: len(model_view)]) == as_json(model_view)


def test_recorded_histories_cover_the_drifts():
    """Histories with the cases that once drifted: a tool result with an image, a failed sub-agent,
    guards, continue-as-new."""
    names = {name.rsplit("/", 1)[-1] for name in TASKS}
    assert {"image_tool", "failed_subtask", "guards", "continue_as_new"} <= names
