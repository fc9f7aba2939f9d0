"""The messages the engine appends to a task's transcript, built in one place.

AgentWorkflow appends them (and the model sees exactly these, through the next model call's
``append``); the client's projection builds its MessagesAppended from the same recorded inputs with
these same functions, so the two cannot drift. ``tests/test_transcript_record.py`` checks every
recorded history: the projected transcript equals what the model calls recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from noeta.protocols.messages import Block, ImageBlock, Message, TextBlock, ToolResultBlock
from noeta.protocols.task import TaskResult, subtask_output
from noeta.protocols.tool import ToolResult

#: A child that ended without a failure of its own (cancelled, terminated, timed out).
SUBTASK_DID_NOT_COMPLETE = "subtask did not complete"


#: What the model is told of a call its goal was interrupted before using (a newer message came).
INTERRUPTED_CALL = "interrupted: the user sent a new message before this call's result was used"
#: The answer of a goal interrupted by a newer one (``TaskResult.status`` "interrupted").
INTERRUPTED_GOAL = "interrupted by a newer message before this goal finished"


def goal_message(goal: str, images: Sequence[ImageBlock] = ()) -> Message:
    """A goal, as the human gave it: the first message of its turn."""
    content: list[Block] = [TextBlock(text=goal), *images]
    return Message(role="user", content=content, origin="human")


def tool_result_block(call_id: str, result: ToolResult) -> ToolResultBlock:
    """A tool call's answer: the stored body when the worker moved a large output away, the
    output's images, and the output as the error text of a failed call."""
    return ToolResultBlock(
        call_id=call_id,
        output=result.output_ref or result.output,
        success=result.success,
        error=None if result.success else (result.output or "tool failed"),
        images=list(result.images) or None,
    )


def subtask_result_block(call_id: str, result: TaskResult) -> ToolResultBlock:
    """A child task's result, as the tool result of the call that spawned it."""
    completed = result.status == "completed"
    return ToolResultBlock(
        call_id=call_id,
        output=subtask_output(result) if completed else result.answer,
        success=completed,
        error=None if completed else result.answer,
    )


def subtask_failed_block(call_id: str, reason: str) -> ToolResultBlock:
    """A child task that failed (its innermost failure message) or never completed."""
    return ToolResultBlock(call_id=call_id, output=None, success=False, error=reason)


def tool_round_message(blocks: Sequence[ToolResultBlock]) -> Message:
    """The results of one round of calls, in call order, as one message."""
    return Message(role="tool", content=list(blocks))


def recalled_messages(memories: Sequence[str]) -> list[Message]:
    """What the memory tool recalled: engine context after the round's results."""
    return [Message(role="user", content=[TextBlock(text=text)], origin="memory") for text in memories]


def engine_feedback(text: str) -> Message:
    """A message the engine adds for the model (a validation issue, a refused finish)."""
    return Message(role="user", content=[TextBlock(text=text)], origin="system")
