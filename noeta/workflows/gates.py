"""Guards and human approvals: the verdicts on proposed actions, and waiting for a human's answer."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from noeta.protocols.appends import engine_feedback
from noeta.protocols.decisions import Finish
from noeta.protocols.hooks import (
    GuardDecision,
    ProposedAction,
    ProposedFinish,
    ProposedToolCall,
    combine,
)
from noeta.protocols.messages import ToolUseBlock
from noeta.protocols.task import (
    ApprovalInput,
    ApprovalRequest,
    CheckGuardsInput,
    denied_by_guard,
    finish_denied_feedback,
    not_approved,
)
from noeta.protocols.names import PATCH_EDITED_APPROVALS
from noeta.protocols.tool import RiskLevel
from noeta.workflows import patches, steps
from noeta.workflows.approvals import Approvals, waiting_request
from noeta.workflows.held_questions import HeldQuestions
from noeta.workflows.run import RunState
from noeta.workflows.status import RunStatus


class Gate:
    """Whether a proposed tool call, subtask or finish may go ahead: the task's guards decide
    (their verdicts recorded, so replay never asks again), and a human when a guard defers.

    Owns the approvals waiting for a human and the finishes refused in the current goal."""

    def __init__(self, run: RunState, approvals: Approvals, status: RunStatus) -> None:
        """The gate reads the run and its transcript from ``run``, opens approval requests in
        ``approvals`` and reports through ``status``."""
        self._run = run
        self.approvals = approvals
        self._status = status
        self.held = HeldQuestions(run, approvals, status)
        """Questions of remote MCP servers listed while their calls hold the request open."""
        self.finish_refusals = 0
        """Refused finishes in the current goal (and run)."""
        self.last_refusal = ""
        """Why the last finish was refused."""
        self._edited: dict[str, dict[str, Any]] = {}
        """Approved tool calls whose approver replaced the arguments: call id -> the arguments."""
        self.approved_by: dict[str, str] = {}
        """Who approved the actions approved by a human and not yet run, by call id (their step's
        summary in the Temporal UI names the approver)."""

    def goal_started(self) -> None:
        """A new goal: its finishes have not been refused yet."""
        self.finish_refusals = 0

    def risk(self, tool_name: str) -> RiskLevel:
        """A tool's declared risk; an unknown tool counts as high."""
        spec = self._run.tools.get(tool_name)
        return spec.risk_level if spec else "high"

    def proposed_call(self, call: ToolUseBlock) -> ProposedToolCall:
        """A tool call as the guards see it."""
        return ProposedToolCall(call.call_id, call.tool_name, call.arguments, self.risk(call.tool_name))

    async def verdicts(self, actions: list[ProposedAction], second_look: bool = False) -> dict[str, GuardDecision]:
        """The deciding verdict per action id (absent: allowed). Recorded, so replay never re-asks.
        ``second_look``: the actions are calls an approver edited."""
        task, state = self._run.task, self._run.state
        if not task.guards or not actions:
            return {}
        self._status.refresh()
        out = await steps.check_guards(
            task,
            CheckGuardsInput(
                task_id=workflow.info().workflow_id,
                trace_id=state.trace_id,
                turn=state.total_turns,
                guards=task.guards,
                actions=actions,
                metadata=task.metadata,
                env=self._run.env(),
                second_look=second_look,
            ),
        )
        deciding = {}
        for action in actions:
            verdict = combine([v for v in out.verdicts if v.call_id == action.call_id])
            if verdict is not None:
                deciding[action.call_id] = verdict
        return deciding

    async def refusal(self, action: ProposedAction, verdict: GuardDecision | None) -> str | None:
        """None when the action may go ahead; else why not (a denial, or a human's refusal)."""
        if verdict is None:
            return None
        if verdict.verdict == "deny":
            return denied_by_guard(verdict.guard, verdict.reason)
        request = waiting_request(action, verdict.reason, verdict.guard, self._run.task.approval_timeout_seconds)
        decision = await self.await_answer(request)
        if decision.approved:
            self.approved_by[action.call_id] = decision.approver or "a human"
        if decision.approved and decision.arguments is not None:
            self._edited[action.call_id] = decision.arguments
        return None if decision.approved else not_approved(decision)

    async def tool_call(self, call: ToolUseBlock, verdict: GuardDecision | None) -> tuple[ToolUseBlock, str | None]:
        """The call to run (the approver's edit of it, if any) and None, or the call and why it
        must not run. An edited call is checked by the guards again: a denial refuses it; an
        ``ask`` does not wait again (the human approved exactly these arguments)."""
        refusal = await self.refusal(self.proposed_call(call), verdict)
        edited = self._edited.pop(call.call_id, None)
        if refusal is not None or edited is None:
            return call, refusal
        # Only tasks that receive an edited approval ask (and record) this patch.
        patches.patched(PATCH_EDITED_APPROVALS)
        call = ToolUseBlock(call_id=call.call_id, tool_name=call.tool_name, arguments=edited)
        again = (await self.verdicts([self.proposed_call(call)], second_look=True)).get(call.call_id)
        if again is not None and again.verdict == "deny":
            self.approved_by.pop(call.call_id, None)  # it will not run: nothing to name an approver on
            return call, denied_by_guard(again.guard, again.reason)
        return call, None

    async def check(self, action: ProposedAction) -> str | None:
        """Ask the guards (and a human, if one defers) about one action: ``refusal`` of its verdict."""
        return await self.refusal(action, (await self.verdicts([action])).get(action.call_id))

    async def await_answer(self, request: ApprovalRequest, timeout_seconds: float | None = None) -> ApprovalInput:
        """Open ``request`` and wait durably for ``approve`` or ``refuse`` (a guard's action, or an
        MCP server's question: noeta.workflows.elicitations); no answer within ``timeout_seconds``
        (default: the task's approval timeout) is a refusal."""
        approvals = self.approvals
        approvals.open(request)
        self._status.waiting()
        timeout = self._run.task.approval_timeout_seconds if timeout_seconds is None else timeout_seconds
        decision = await approvals.wait(request, timeout)
        self._status.settled()
        return decision

    async def finish_allowed(self, decision: Finish, index: int) -> bool:
        """Whether goal ``index`` may finish with ``decision``; if not, the model is told why."""
        state = self._run.state
        if not self._run.task.guards:
            return True
        state.finish_attempts += 1
        action = ProposedFinish(decision.answer, decision.status, call_id=f"finish:{index}:{state.finish_attempts}")
        refusal = await self.check(action)
        if refusal is None:
            return True
        self.finish_refusals += 1
        self.last_refusal = refusal
        self._run.append(engine_feedback(finish_denied_feedback(refusal)))
        return False
