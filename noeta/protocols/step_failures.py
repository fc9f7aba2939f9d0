"""What a failed step means for its task, decided once.

A final answer the validators rejected, a tool call or a sub-agent that failed for good: whether the
model is told (and in what words) or the task ends. AgentWorkflow acts on these decisions and the
client's projection shows them; both call the functions below, so the event log can never tell a
different story from the one the workflow lived.
"""

from __future__ import annotations

from typing import Literal

from noeta.errors import (
    ContentIntegrityError,
    ContentMissingError,
    ContentStoreError,
    ResourceNotFoundError,
    ScopeError,
    ToolIdentityMismatchError,
    ToolNotRegisteredError,
)
from noeta.protocols.activity_io import ValidateOutput
from noeta.protocols.feedback import tool_failed_text
from noeta.protocols.tool import ToolResult
from noeta.protocols.validation import DEFAULT_FAILURE_MESSAGE

#: Configuration errors no model can fix (a missing resource, a scope that fails its schema):
#: raised by a tool or by a sub-agent, they end the task. ApplicationError types, named by the
#: classes so a rename cannot leave a stale string behind.
CONFIGURATION_ERRORS: tuple[str, ...] = (ResourceNotFoundError.__name__, ScopeError.__name__)
#: Content-store failures that end a step for good, whichever step: no model can fix them.
STORE_ERRORS: tuple[str, ...] = (
    ContentStoreError.__name__, ContentIntegrityError.__name__, ContentMissingError.__name__
)
#: Tool errors that end the task instead of going back to the model as a failed tool result (the
#: tool activity does not retry them either).
TASK_FATAL_TOOL_ERRORS: tuple[str, ...] = (
    ToolIdentityMismatchError.__name__,
    ToolNotRegisteredError.__name__,
    *CONFIGURATION_ERRORS,
    # The content store would not take the finished output, or a stored body is damaged or gone.
    *STORE_ERRORS,
)

#: The reason given for a failure that carries neither a message nor an error type.
UNEXPLAINED_FAILURE = "failed"


def failure_reason(message: str | None, error_type: str | None = None) -> str:
    """What a failure is reported as: its innermost message, else its error type."""
    return message or error_type or UNEXPLAINED_FAILURE


def tool_failure_ends_task(error_type: str | None) -> bool:
    """Whether a tool call that failed with this ApplicationError type fails the whole task."""
    return error_type in TASK_FATAL_TOOL_ERRORS


def failed_tool_result(tool_name: str, reason: str) -> ToolResult:
    """The result the model gets for a tool call whose activity failed for good (retries spent,
    timed out) with an error that does not end the task."""
    return ToolResult(success=False, output=tool_failed_text(tool_name, reason))


def subtask_failure_ends_task(error_type: str | None) -> bool:
    """Whether a sub-agent that failed with this ApplicationError type fails its parent too."""
    return error_type in CONFIGURATION_ERRORS


def validation_issue(checked: ValidateOutput) -> str:
    """Why a rejected answer was rejected, as the model and the event log are told."""
    return checked.issue or DEFAULT_FAILURE_MESSAGE


def validation_failure_type(checked: ValidateOutput) -> Literal["schema", "validator"]:
    """What rejected the answer: its schema, or a validator."""
    return checked.failure_type or "validator"


def validation_gives_up(rejected: int, max_retries: int) -> bool:
    """Whether a goal whose answer has been rejected ``rejected`` times fails (with
    AttemptsExhaustedError) instead of asking the model again: the first answer and ``max_retries``
    more are checked."""
    return rejected > max_retries


__all__ = [
    "CONFIGURATION_ERRORS",
    "STORE_ERRORS",
    "TASK_FATAL_TOOL_ERRORS",
    "UNEXPLAINED_FAILURE",
    "failed_tool_result",
    "failure_reason",
    "subtask_failure_ends_task",
    "tool_failure_ends_task",
    "validation_failure_type",
    "validation_gives_up",
    "validation_issue",
]
