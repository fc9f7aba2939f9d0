"""Tool rounds: the results of one CallTools decision enter the transcript as one message."""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio.api.history.v1 import HistoryEvent

from noeta.client.projection.transcript import Transcript
from noeta.protocols.appends import INTERRUPTED_CALL, tool_round_message
from noeta.protocols.messages import ToolResultBlock


@dataclass
class _Round:
    """The tool calls of one CallTools decision: the workflow appends their results as one message,
    in call order, once all are done, whatever order they finish in."""

    expected: list[str]
    guarded: bool
    workflow_task: int | None = None
    results: dict[str, ToolResultBlock] = field(default_factory=dict)
    memories: dict[str, list[str]] = field(default_factory=dict)
    """What the memory tool recalled, by call: it follows the round's results (origin "memory")."""
    local: bool = False
    """Some call ran as a local activity: its marker is recorded when it finished, not in call order."""


class ToolRounds:
    """Collects the open round's results and appends them, as AgentWorkflow does, when the last
    one arrives; a result outside any round is appended on its own."""

    def __init__(self, transcript: Transcript) -> None:
        """Causes of the round's events come from ``transcript``."""
        self._transcript = transcript
        self._open: _Round | None = None
        self._closing: tuple[str, HistoryEvent, int] | None = None
        """(actor, event, cause) of the open round's last result, when that round has a local call
        and every call it knows of has ended: its workflow task may still record another call's
        marker, so it is appended at the next event that is not a marker (``settle``)."""

    def guarded(self, call_ids: list[str]) -> None:
        """A round whose calls the guards check first: they may start in later workflow tasks. The
        guards' second look at a call of the open round (its approver edited the arguments) opens
        no round: the call's result still joins the round it was proposed in."""
        current = self._open
        if current is not None and current.guarded and call_ids and set(call_ids) <= set(current.expected) - set(current.results):
            return
        self.settle()
        self._open = _Round(expected=call_ids, guarded=True) if call_ids else None

    def join(self, call_id: str, workflow_task: int, *, local: bool = False) -> None:
        """A call of the round started (or was refused) in ``workflow_task``: calls of an unguarded
        round are scheduled together, in call order, in one workflow task (``local``: a local
        tool's call, whose marker is recorded in the workflow task that saw it finish)."""
        current = self._open
        if current is not None and call_id in current.expected:
            current.local = current.local or local
            return
        if current is not None and not current.guarded and current.workflow_task == workflow_task:
            current.expected.append(call_id)
            current.local = current.local or local
            self._closing = None  # not complete after all
            return
        self.settle()
        self._open = _Round(expected=[call_id], guarded=False, workflow_task=workflow_task, local=local)

    def result(
        self, block: ToolResultBlock, actor: str, event: HistoryEvent, cause: int, memories: list[str] | None = None
    ) -> None:
        """One call's result (and what it recalled)."""
        current = self._open
        if current is None or block.call_id not in current.expected:
            self.settle()
            seq = self._transcript.append([tool_round_message([block])], actor, event, cause)
            self._transcript.recalled(memories or [], event, seq)
            return
        current.results[block.call_id] = block
        current.memories[block.call_id] = memories or []
        if len(current.results) == len(current.expected):
            if current.local:
                self._closing = (actor, event, cause)
                return
            self._append(current, actor, event, cause)

    def interrupted(self, event: HistoryEvent, cause: int | None) -> None:
        """The goal was interrupted inside a round: as the workflow does, every call of the round
        gets the "interrupted" result the model is told (noeta.workflows.loop.GoalLoop.interrupted)."""
        self.settle()
        current = self._open
        if current is None:
            return
        self._open = None
        order = sorted(current.expected, key=lambda c: self._transcript.proposal(c) or 0)
        blocks = [ToolResultBlock(call_id=c, output=INTERRUPTED_CALL, success=False) for c in order]
        self._transcript.append([tool_round_message(blocks)], "engine", event, cause)

    def settle(self) -> None:
        """A history event that is not a marker: a round waiting for the end of its workflow task
        (see ``_closing``) is complete, and appended."""
        if self._closing is not None and self._open is not None:
            self._append(self._open, *self._closing)
        self._closing = None

    def _append(self, current: _Round, actor: str, event: HistoryEvent, cause: int) -> None:
        self._open = None
        self._closing = None
        order = current.expected
        if current.local:  # markers come as calls finish: the workflow appends in call order
            order = sorted(order, key=lambda c: self._transcript.proposal(c) or 0)
        blocks = [current.results[c] for c in order]
        seq = self._transcript.append([tool_round_message(blocks)], actor, event, cause)
        self._transcript.recalled([m for c in order for m in current.memories[c]], event, seq)
