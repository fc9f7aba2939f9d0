"""The transcript as the event log shows it: MessagesAppended envelopes, each followed by the
ToolCallProposed of the calls its messages ask for."""

from __future__ import annotations

from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.log import EnvelopeLog
from noeta.protocols import event_log as ev
from noeta.protocols.appends import engine_feedback, recalled_messages
from noeta.protocols.messages import Message, ToolUseBlock


class Transcript:
    """Appends messages to the log and remembers where each tool call was asked for, so the
    envelopes a call causes can point at it."""

    def __init__(self, log: EnvelopeLog) -> None:
        """Records into ``log``."""
        self._log = log
        self.last_message_seq: int | None = None
        """The seq of the latest MessagesAppended: what an engine event without a closer cause follows."""
        self._proposals: dict[str, int] = {}  # call id -> seq of its ToolCallProposed
        self._calls: dict[str, ToolUseBlock] = {}  # call id -> the latest call the model asked for under it

    def append(self, messages: list[Message], actor: str, event: HistoryEvent, cause: int | None) -> int:
        """One MessagesAppended (then its tool calls' ToolCallProposed); returns its seq."""
        origin = messages[0].origin if messages else None
        seq = self._log.emit(ev.MessagesAppended(messages=messages), actor, event, cause, origin)
        self.last_message_seq = seq
        for message in messages:
            for call in message.tool_uses:
                proposed = ev.ToolCallProposed(call_id=call.call_id, tool_name=call.tool_name, arguments=call.arguments)
                self._proposals[call.call_id] = self._log.emit(proposed, actor, event, seq)
                self._calls[call.call_id] = call
        return seq

    def proposal(self, call_id: str) -> int | None:
        """The seq of the ToolCallProposed of ``call_id``, if the model asked for it."""
        return self._proposals.get(call_id)

    def call(self, call_id: str) -> ToolUseBlock | None:
        """The tool call the model asked for under ``call_id`` (its latest, if it reused the id)."""
        return self._calls.get(call_id)

    def cause_of(self, call_id: str) -> int | None:
        """What an envelope about ``call_id`` points at: its proposal, else the latest message."""
        return self._proposals.get(call_id, self.last_message_seq)

    def feedback(self, text: str, event: HistoryEvent, cause: int) -> None:
        """A message the engine adds for the model (origin "system"), as AgentWorkflow adds it."""
        self.append([engine_feedback(text)], "engine", event, cause)

    def recalled(self, memories: list[str], event: HistoryEvent, cause: int) -> None:
        """Memories the memory tool recalled, as AgentWorkflow appends them after the results."""
        if memories:
            self.append(recalled_messages(memories), "engine", event, cause)
