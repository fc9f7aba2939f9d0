"""Tool calls the workflow refuses without running them: a guard's denial, a human's refusal (or an
approval that timed out), a tool the worker does not have.

Since PATCH_REFUSALS_RECORDED such a call is recorded in the memo (one history event) instead of
being scheduled as an invoke_tool activity that only echoed the refusal: the Temporal UI then never
shows a refused call as a completed tool activity, and the projection emits ToolCallRefused.
"""

from __future__ import annotations

from temporalio import workflow

from noeta.protocols.messages import ToolResultBlock, ToolUseBlock
from noeta.protocols.names import PATCH_REFUSALS_RECORDED, REFUSED_MEMO_KEY
from noeta.protocols.task import ToolRefusal, refused_result
from noeta.workflows import patches


def recorded() -> bool:
    """Whether this task records refusals (new tasks) or schedules them as activities (tasks
    recorded before the change, replaying)."""
    return patches.patched(PATCH_REFUSALS_RECORDED)


def record_refusal(call: ToolUseBlock, reason: str) -> ToolResultBlock:
    """Record that ``call`` was refused without running (in the workflow's memo, for the projection)
    and return the result the model gets."""
    refusal = ToolRefusal(call_id=call.call_id, tool_name=call.tool_name, arguments=call.arguments, reason=reason)
    workflow.upsert_memo({REFUSED_MEMO_KEY: refusal})
    return refused_result(refusal)
