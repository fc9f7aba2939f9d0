"""Human approvals: actions a guard sent for approval, waiting durably for the ``approve`` update."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from noeta.errors import ApprovalNotPendingError, ConfigurationError
from noeta.protocols.elicitation import ElicitationRequest, content_problem, with_defaults
from noeta.protocols.hooks import ProposedAction, ProposedToolCall
from noeta.protocols.names import APPROVAL_TIMER_PREFIX, METRIC_APPROVAL_WAIT
from noeta.protocols.task import ApprovalInput, ApprovalRequest, approval_timed_out


def waiting_request(action: ProposedAction, reason: str | None, guard: str, timeout_seconds: float) -> ApprovalRequest:
    """``action`` waiting for a human from now, refused ``timeout_seconds`` later unless answered."""
    now = workflow.now()
    deadline = now + timedelta(seconds=timeout_seconds)
    return ApprovalRequest(action.call_id, action, reason, guard, waiting_since=now.isoformat(), deadline=deadline.isoformat())


class Approvals:
    """Requests waiting for a human, and the answers that arrived. Never carried across
    continue-as-new: a task only continues as new when none is pending."""

    def __init__(self) -> None:
        """Starts with nothing pending."""
        self.pending: dict[str, ApprovalRequest] = {}
        self._answers: dict[str, ApprovalInput] = {}

    def check_answer(self, decision: ApprovalInput) -> None:
        """The ``approve`` update's validator: only a waiting, unanswered action can be answered."""
        if decision.call_id not in self.pending or decision.call_id in self._answers:
            waiting = ", ".join(sorted(self.pending)) or "none"
            raise ApplicationError(
                f"no action {decision.call_id!r} is waiting for approval (waiting: {waiting})",
                type=ApprovalNotPendingError.__name__,
            )
        action = self.pending[decision.call_id].action
        if isinstance(action, ElicitationRequest):  # the arguments are the answer's content
            problem = content_problem(action.requested_schema, with_defaults(action.requested_schema, decision.arguments or {}))
            if decision.approved and problem is not None:
                raise ApplicationError(f"the answer does not match the requested schema: {problem}", type=ConfigurationError.__name__)
            return
        if decision.arguments is not None:
            if not decision.approved or not isinstance(decision.arguments, dict):
                raise ApplicationError(
                    "arguments (a JSON object) can only come with an approval", type=ConfigurationError.__name__
                )
            if not isinstance(self.pending[decision.call_id].action, ProposedToolCall):
                raise ApplicationError(
                    f"{decision.call_id!r} is not a tool call: only a tool call's arguments can be edited",
                    type=ConfigurationError.__name__,
                )

    def answer(self, decision: ApprovalInput) -> None:
        """Record a human's answer (already checked by ``check_answer``)."""
        self._answers[decision.call_id] = decision

    def answered(self, call_id: str) -> ApprovalInput | None:
        """The answer that arrived for a pending request (None: none yet, or not pending)."""
        return self._answers.get(call_id) if call_id in self.pending else None

    def close(self, call_id: str) -> None:
        """A request answered (or no longer asked) outside :meth:`wait`: not pending any more."""
        self.pending.pop(call_id, None)
        self._answers.pop(call_id, None)

    def withdraw_all(self) -> None:
        """The goal waiting for them ended without them (interrupted): nothing is pending now."""
        self.pending.clear()
        self._answers.clear()

    def open(self, request: ApprovalRequest) -> None:
        """Add ``request`` to the pending approvals."""
        self.pending[request.call_id] = request

    async def wait(self, request: ApprovalRequest, timeout_seconds: float) -> ApprovalInput:
        """The answer to an opened request; no answer within the timeout is a refusal."""
        # No try/finally here: code in a finally also runs when the worker evicts the workflow from
        # its cache, and workflow calls are not allowed then.
        opened = workflow.now()
        try:
            await workflow.wait_condition(
                lambda: request.call_id in self._answers,
                timeout=timedelta(seconds=timeout_seconds),
                timeout_summary=f"{APPROVAL_TIMER_PREFIX}{request.call_id}",
            )
            decision = self._answers[request.call_id]
        except asyncio.TimeoutError:
            decision = approval_timed_out(request.call_id, timeout_seconds)
        del self.pending[request.call_id]
        # Reading the clock and recording a metric issue no command; nothing is recorded in replay.
        seconds = (workflow.now() - opened).total_seconds()
        workflow.metric_meter().create_histogram_float(METRIC_APPROVAL_WAIT, "seconds an action waited for a human", "s").record(
            seconds, {"decision": "approved" if decision.approved else "refused"}
        )
        return decision
