"""Sub-agents: the child workflows a task starts, and what their ends tell the parent's model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.log import EnvelopeLog
from noeta.client.projection.payloads import (
    child_close_attrs,
    decode_first,
    failure_text,
    innermost_message,
    own_error_type,
)
from noeta.client.projection.transcript import Transcript
from noeta.protocols import event_log as ev
from noeta.protocols.appends import (
    SUBTASK_DID_NOT_COMPLETE,
    subtask_failed_block,
    subtask_result_block,
    tool_round_message,
)
from noeta.protocols.messages import ToolResultBlock
from noeta.protocols.step_failures import subtask_failure_ends_task
from noeta.protocols.task import TaskInput, TaskResult, subtask_output


@dataclass(frozen=True)
class _Child:
    call_id: str
    task_id: str
    spawned_seq: int


class Subtasks:
    """The run's children by the id of the event that started them (ids start over each run)."""

    def __init__(self, log: EnvelopeLog, transcript: Transcript) -> None:
        """Records into ``log``; causes come from ``transcript``."""
        self._log = log
        self._transcript = transcript
        self._children: dict[int, _Child] = {}

    def begin_run(self) -> None:
        """A new run: event ids in its history start over."""
        self._children.clear()

    def initiated(self, event: HistoryEvent) -> None:
        """A child workflow was started for a subtask (or a declared sub-agent)."""
        attrs = event.start_child_workflow_execution_initiated_event_attributes
        child: TaskInput = decode_first(attrs.input, TaskInput)
        call_id = attrs.workflow_id.rsplit("/", 1)[-1]
        agent = child.metadata.get("agent")  # set by the workflow for a declared sub-agent
        seq = self._log.emit(
            ev.SubtaskSpawned(call_id=call_id, goal=child.goal, child_task_id=attrs.workflow_id, agent=agent),
            "engine",
            event,
            self._transcript.cause_of(call_id),
        )
        self._children[event.event_id] = _Child(call_id, attrs.workflow_id, seq)

    def completed(self, event: HistoryEvent) -> None:
        """A child returned its result (completed, or a goal that failed by its policy's word)."""
        attrs = event.child_workflow_execution_completed_event_attributes
        child = self._children.get(attrs.initiated_event_id)
        if child is None:
            return
        result: TaskResult = decode_first(attrs.result, TaskResult)
        completed = result.status == "completed"
        answer = subtask_output(result) if completed else result.answer
        block = subtask_result_block(child.call_id, result)
        self._closed(event, child, answer, completed, block, usage=result.usage, data=result.data)

    def ended(self, event: HistoryEvent) -> None:
        """A child that failed, or was cancelled, terminated or timed out."""
        attrs = child_close_attrs(event)
        child = self._children.get(attrs.initiated_event_id)
        if child is None:
            return
        block: ToolResultBlock | None
        if event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
            answer, _ = failure_text(attrs.failure)
            if subtask_failure_ends_task(own_error_type(attrs.failure)):
                block = None  # the parent fails too: no tool result reaches its model
            else:
                block = subtask_failed_block(child.call_id, innermost_message(attrs.failure))
        elif event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED:
            answer, block = SUBTASK_DID_NOT_COMPLETE, None  # the parent is cancelled with it
        else:
            answer, block = SUBTASK_DID_NOT_COMPLETE, subtask_failed_block(child.call_id, SUBTASK_DID_NOT_COMPLETE)
        self._closed(event, child, answer, False, block)

    def _closed(
        self, event: HistoryEvent, child: _Child, answer: str, success: bool,
        block: ToolResultBlock | None, *, usage: Any = None, data: Any = None,
    ) -> None:
        """SubtaskCompleted, then (unless it ended the parent too) the tool result its parent's
        model got, built as AgentWorkflow builds it."""
        actor = f"subtask:{child.task_id}"
        seq = self._log.emit(
            ev.SubtaskCompleted(
                call_id=child.call_id, child_task_id=child.task_id, success=success, answer=answer,
                usage=usage, data=data,
            ),
            actor,
            event,
            child.spawned_seq,
        )
        if block is not None:
            self._transcript.append([tool_round_message([block])], actor, event, seq)
