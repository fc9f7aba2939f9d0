"""What the model is told when the engine refuses, rejects or reports something: one wording,
shared by the workflow that writes it into the transcript and the projection that shows it."""

from __future__ import annotations

import json

from noeta.protocols.interaction import ApprovalInput, TaskResult
from noeta.protocols.messages import ToolResultBlock
from noeta.protocols.run_state import ToolRefusal


def validation_feedback(issue: str) -> str:
    """The message that tells the model why its answer was rejected (shared with the projection)."""
    return f"Your answer was rejected: {issue}\nAnswer again, fixing this."


def finish_denied_feedback(reason: str) -> str:
    """What the model is told when a guard or a human refuses to let it finish."""
    return f"You may not finish yet: {reason}\nContinue the task."


def denied_by_guard(guard: str, reason: str | None) -> str:
    """What the model is told when guard ``guard`` denies its tool call."""
    return f"Denied by guard {guard!r}: {reason or 'no reason given'}"


def not_approved(decision: ApprovalInput) -> str:
    """What the model is told when a human refuses its action (or nobody answered in time)."""
    return f"Not approved by {decision.approver or 'a human'}: {decision.reason or 'no reason given'}"


#: The approver of a refusal nobody gave: the approval's time ran out.
TIMEOUT_APPROVER = "timeout"


def approval_timed_out(call_id: str, timeout_seconds: float) -> ApprovalInput:
    """The refusal recorded when nobody answers an approval in time."""
    return ApprovalInput(
        call_id, approved=False, reason=f"no answer within {timeout_seconds:g}s", approver=TIMEOUT_APPROVER
    )


def refused_result(refusal: ToolRefusal) -> ToolResultBlock:
    """The failed tool result the model gets for a refused call (shared with the projection)."""
    return ToolResultBlock(call_id=refusal.call_id, output=refusal.reason, success=False, error=refusal.reason)


def tool_failed_text(tool_name: str, reason: str) -> str:
    """What the model is told when a tool call's activity failed for good (retries, timeouts)."""
    return f"tool {tool_name!r} failed after retries: {reason}"


def subtask_output(result: TaskResult) -> str:
    """What the parent's transcript gets from a child that completed: its structured data as JSON
    when it has an output schema, else its answer (shared with the projection)."""
    if result.data is None:
        return result.answer
    return json.dumps(result.data, ensure_ascii=False, separators=(",", ":"))
