"""Questions a remote MCP server asked on a tool call whose worker holds the server's request open
for a person's answer (noeta.protocols.held_questions): listed while the call runs, answered with
``approve``/``refuse`` like any question, read back by the holding call through a query.

A held question ends one of three ways: the call completes (the answer went back on the held
request, or the server went on without it: the question is withdrawn), the call stops at it (the
grace period passed: noeta.workflows.elicitations waits for it as for any question, until the
deadline it was given when listed), or the call stops at a later request (its answer joins the
answers the call is made again with).
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from noeta.errors import ApprovalNotPendingError
from noeta.protocols.elicitation import MAX_ELICITATIONS_PER_CALL, ElicitationAnswer, ElicitationRequest, answer_of
from noeta.protocols.held_questions import HeldAnswer, HeldQuestion, elicitation_request
from noeta.protocols.names import PATCH_MCP_ELICITATION_HELD
from noeta.protocols.task import ApprovalInput, ApprovalRequest
from noeta.workflows import patches
from noeta.workflows.approvals import Approvals, waiting_request
from noeta.workflows.run import RunState
from noeta.workflows.status import RunStatus

#: A question whose deadline passed while it was held still gets this long to be answered.
LAST_CHANCE_SECONDS = 1.0


class _Call:
    """A remote call that may hold its server's questions: the answers it went out with, whether
    it runs now, and its questions listed while it ran, by number."""

    __slots__ = ("flying", "held", "known")

    def __init__(self) -> None:
        self.known = 0
        self.flying = False
        self.held: dict[int, ApprovalRequest] = {}


class HeldQuestions:
    """The held questions of the task's remote calls; they are pending approvals meanwhile."""

    def __init__(self, run: RunState, approvals: Approvals, status: RunStatus) -> None:
        """Lists questions in ``approvals`` (with ``run``'s approval timeout), reports through ``status``."""
        self._run = run
        self._approvals = approvals
        self._status = status
        self._calls: dict[str, _Call] = {}

    def flying(self, tool_call_id: str, known: int) -> None:
        """The call goes out with ``known`` answers: its server's next questions may be held."""
        call = self._calls.setdefault(tool_call_id, _Call())
        call.known, call.flying = known, True

    def landed(self, tool_call_id: str) -> None:
        """The call stopped: nothing more can be held for it until it goes out again."""
        call = self._calls.get(tool_call_id)
        if call is not None:
            call.flying = False

    def check(self, asked: HeldQuestion) -> None:
        """The update's validator: only the next question of a call in flight is listed (a retried
        attempt's repeat, a late or a forged one are refused and leave no trace in history)."""
        call = self._calls.get(asked.tool_call_id)
        expected = call.known + len(call.held) + 1 if call is not None and call.flying else None
        if asked.index != expected or asked.index > MAX_ELICITATIONS_PER_CALL or asked.call_id in self._approvals.pending:
            raise ApplicationError(f"no call holds question {asked.call_id!r} now", type=ApprovalNotPendingError.__name__)

    def hold(self, asked: HeldQuestion) -> None:
        """List a question a call holds (checked by :meth:`check`), as a question waiting for a person."""
        if not patches.patched(PATCH_MCP_ELICITATION_HELD):
            return
        action = elicitation_request(asked.tool_call_id, asked.tool_name, asked.index, asked.request)
        request = waiting_request(action, action.message, f"mcp:{action.server}", self._run.task.approval_timeout_seconds)
        self._calls[asked.tool_call_id].held[asked.index] = request
        self._approvals.open(request)
        self._status.waiting()

    def answer(self, call_id: str) -> HeldAnswer:
        """The query: the answer to a held question, once a person gave it."""
        request = next((r for c in self._calls.values() for r in c.held.values() if r.call_id == call_id), None)
        if request is None or call_id not in self._approvals.pending:
            return HeldAnswer(held=False)
        decision = self._approvals.answered(call_id)
        return HeldAnswer(held=True, answer=None if decision is None else _answer(request, decision))

    def take(self, tool_call_id: str, index: int) -> ApprovalRequest | None:
        """The held question the call stopped at (its wait goes on), no longer held."""
        call = self._calls.get(tool_call_id)
        return call.held.pop(index, None) if call is not None else None

    def absorb(self, tool_call_id: str, answers: list[ElicitationAnswer]) -> bool:
        """Move the answers given on held requests, in order after ``answers``, into it (the call
        stopped at a later request and is made again with them); True when any moved."""
        call = self._calls.get(tool_call_id)
        moved = False
        while call is not None and len(answers) + 1 in call.held:
            request = call.held[len(answers) + 1]
            decision = self._approvals.answered(request.call_id)
            if decision is None:
                break
            answers.append(_answer(request, decision))
            del call.held[len(answers)]
            self._approvals.close(request.call_id)
            moved = True
        if moved:
            self._status.settled()
        return moved

    def ended(self, tool_call_id: str) -> None:
        """The call is over: questions still listed for it are withdrawn (its server went on
        without them, or the call failed)."""
        call = self._calls.pop(tool_call_id, None)
        if call is not None and call.held:
            for request in call.held.values():
                self._approvals.close(request.call_id)
            self._status.settled()


def remaining_seconds(request: ApprovalRequest) -> float:
    """How long a question listed while held may still wait for its answer (its deadline was set
    when it was listed)."""
    deadline = datetime.fromisoformat(request.deadline) if request.deadline else workflow.now()
    return max(LAST_CHANCE_SECONDS, (deadline - workflow.now()).total_seconds())


def _answer(request: ApprovalRequest, decision: ApprovalInput) -> ElicitationAnswer:
    action = request.action
    schema = action.requested_schema if isinstance(action, ElicitationRequest) else {}
    return answer_of(decision.approved, decision.reason, decision.arguments, schema)


__all__ = ["HeldQuestions", "remaining_seconds"]
