"""Guards and human approvals: the verdicts on proposed actions, and waiting for a human's answer."""

from __future__ import annotations

from temporalio import workflow

from noeta.protocols.appends import engine_feedback
from noeta.protocols.decisions import Finish
from noeta.protocols.hooks import (
    GuardDecision,
    ProposedAction,
    ProposedFinish,
    combine,
)
from noeta.protocols.task import (
    ApprovalInput,
    ApprovalRequest,
    CheckGuardsInput,
    denied_by_guard,
    finish_denied_feedback,
    not_approved,
)
from noeta.protocols.tool import RiskLevel
from noeta.workflows import steps
from noeta.workflows.run import AgentRun
from noeta.workflows.subagents import run_env


class Gates(AgentRun):
    def _risk(self, tool_name: str) -> RiskLevel:
        spec = self._tools.get(tool_name)
        return spec.risk_level if spec else "high"

    async def _check_guards(self, actions: list[ProposedAction]) -> dict[str, GuardDecision]:
        """The deciding verdict per action id (absent: allowed). Recorded, so replay never re-asks."""
        task = self._task
        if not task.guards or not actions:
            return {}
        self._details.refresh(self._approvals.pending, task.approval_timeout_seconds)
        out = await steps.check_guards(
            task,
            CheckGuardsInput(
                task_id=workflow.info().workflow_id,
                trace_id=self._ctx.trace_id if self._ctx else workflow.info().workflow_id,
                turn=self._state.total_turns,
                guards=task.guards,
                actions=actions,
                metadata=task.metadata,
                env=run_env(task, self._state),
            ),
        )
        deciding = {}
        for action in actions:
            verdict = combine([v for v in out.verdicts if v.call_id == action.call_id])
            if verdict is not None:
                deciding[action.call_id] = verdict
        return deciding

    async def _refusal(self, action: ProposedAction, verdict: GuardDecision | None) -> str | None:
        """None when the action may go ahead; else why not (a denial, or a human's refusal)."""
        if verdict is None:
            return None
        if verdict.verdict == "deny":
            return denied_by_guard(verdict.guard, verdict.reason)
        decision = await self._await_approval(ApprovalRequest(action.call_id, action, verdict.reason, verdict.guard))
        return None if decision.approved else not_approved(decision)

    async def _await_approval(self, request: ApprovalRequest) -> ApprovalInput:
        """Wait durably for ``approve``; no answer within the timeout is a refusal."""
        timeout = self._task.approval_timeout_seconds
        self._approvals.open(request)
        self._update_index("awaiting_approval")
        self._details.refresh(self._approvals.pending, timeout)
        decision = await self._approvals.wait(request, timeout)
        if not self._approvals.pending:
            self._update_index("running")
        self._details.refresh(self._approvals.pending, timeout)
        return decision

    async def _finish_allowed(self, decision: Finish, index: int) -> bool:
        if not self._task.guards:
            return True
        self._state.finish_attempts += 1
        action = ProposedFinish(decision.answer, decision.status, call_id=f"finish:{index}:{self._state.finish_attempts}")
        refusal = await self._refusal(action, (await self._check_guards([action])).get(action.call_id))
        if refusal is None:
            return True
        self._finish_refusals += 1
        self._last_refusal = refusal
        self._append(engine_feedback(finish_denied_feedback(refusal)))
        return False

