"""The projection's state: tool rounds, scheduled steps, envelopes emitted so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timezone
from typing import Any

from temporalio.api.history.v1 import HistoryEvent

from noeta.protocols import event_log as ev
from noeta.protocols.appends import (
    engine_feedback,
    recalled_messages,
    tool_round_message,
)
from noeta.protocols.messages import Message, ToolResultBlock
from noeta.protocols.task import GoalInput, TaskInput


@dataclass
class _ToolRound:
    """The tool calls of one CallTools decision: the workflow appends their results as one message,
    in call order, once all are done, whatever order they finish in."""

    expected: list[str]
    guarded: bool
    workflow_task: int | None = None
    results: dict[str, ToolResultBlock] = field(default_factory=dict)
    memories: dict[str, list[str]] = field(default_factory=dict)
    """What the memory tool recalled, by call: it follows the round's results (origin "memory")."""


#: The marker temporalio records for a completed local activity (details "data" and "result").
LOCAL_ACTIVITY_MARKER = "core_local_activity"


@dataclass
class _Scheduled:
    activity: str
    input: Any
    seq: int


@dataclass
class ProjectionState:
    """What the projection of one task knows so far, and how it emits envelopes and messages."""

    task_id: str
    envelopes: list[ev.EventEnvelope] = field(default_factory=list)
    trace_id: str = ""
    provider: str = ""
    task: TaskInput | None = None
    scheduled: dict[int, _Scheduled] = field(default_factory=dict)
    children: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    last_message_seq: int | None = None
    call_seq: dict[str, int] = field(default_factory=dict)  # call_id -> seq of the message asking for it
    started_attempt: dict[int, int] = field(default_factory=dict)
    # The workflow takes goals one at a time, in order: a goal accepted while another is running
    # enters the transcript when the running one ends (mirrors AgentWorkflow.run).
    goal_active: bool = True
    queued_goals: list[tuple[GoalInput, int]] = field(default_factory=list)
    validations_failed: int = 0  # in the current goal
    round: _ToolRound | None = None
    goal_ids: set[str] = field(default_factory=set)
    approval_seq: dict[str, int] = field(default_factory=dict)  # pending approvals: call id -> request seq
    approval_timers: dict[str, tuple[str, float]] = field(default_factory=dict)  # timer id -> (call id, timeout)

    def emit(
        self,
        payload: Any,
        actor: str,
        event: HistoryEvent,
        causation: int | None,
        origin: str | None = None,
    ) -> int:
        seq = len(self.envelopes) + 1
        self.envelopes.append(
            ev.EventEnvelope(
                seq=seq,
                type=type(payload).__name__,
                actor=actor,
                origin=origin,  # type: ignore[arg-type]
                trace_id=self.trace_id,
                causation_id=causation,
                payload=payload,
                task_id=self.task_id,
                # Timezone-aware (UTC), so JSON/SSE consumers never guess.
                timestamp=event.event_time.ToDatetime(tzinfo=timezone.utc) if event.HasField("event_time") else None,
                history_event_id=event.event_id,
            )
        )
        return seq

    def messages(self, messages: list[Message], actor: str, event: HistoryEvent, cause: int | None) -> int:
        origin = messages[0].origin if messages else None
        seq = self.emit(ev.MessagesAppended(messages=messages), actor, event, cause, origin)
        self.last_message_seq = seq
        for message in messages:
            for call in message.tool_uses:
                proposed = ev.ToolCallProposed(call_id=call.call_id, tool_name=call.tool_name, arguments=call.arguments)
                self.call_seq[call.call_id] = self.emit(proposed, actor, event, seq)
        return seq

    def feedback(self, text: str, event: HistoryEvent, cause: int) -> None:
        """A message the engine adds for the model (origin "system"), mirroring AgentWorkflow."""
        self.messages([engine_feedback(text)], "engine", event, cause)

    def join_round(self, call_id: str, workflow_task: int) -> None:
        current = self.round
        if current is not None and call_id in current.expected:
            return
        if current is not None and not current.guarded and current.workflow_task == workflow_task:
            current.expected.append(call_id)  # scheduled together, in call order
            return
        self.round = _ToolRound(expected=[call_id], guarded=False, workflow_task=workflow_task)

    def tool_result(
        self, block: ToolResultBlock, actor: str, event: HistoryEvent, cause: int, memories: list[str] | None = None
    ) -> None:
        current = self.round
        if current is None or block.call_id not in current.expected:
            seq = self.messages([tool_round_message([block])], actor, event, cause)
            self.recalled(memories or [], event, seq)
            return
        current.results[block.call_id] = block
        current.memories[block.call_id] = memories or []
        if len(current.results) == len(current.expected):
            self.round = None
            blocks = [current.results[c] for c in current.expected]
            seq = self.messages([tool_round_message(blocks)], actor, event, cause)
            self.recalled([m for c in current.expected for m in current.memories[c]], event, seq)

    def recalled(self, memories: list[str], event: HistoryEvent, cause: int) -> None:
        """Memories the memory tool recalled, as AgentWorkflow appends them after the results."""
        if memories:
            self.messages(recalled_messages(memories), "engine", event, cause)

    def begin_run(self) -> None:
        """A new run of the task starts (continue-as-new): ids in its history start over."""
        self.scheduled.clear()
        self.children.clear()
        self.started_attempt.clear()

