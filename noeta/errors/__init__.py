"""Every user-facing error Noeta raises, in one hierarchy: ``from noeta.errors import X``.

Pure package (no I/O, no Temporal imports) so workflows, activities and the client can all share it.
Errors that cross the workflow boundary travel as Temporal ``ApplicationError`` whose ``type`` is the
class name and whose single detail is ``to_details()``; :func:`rebuild_error` turns them back into
these typed exceptions on the client side.

The classes are grouped by idea in private modules; this package is the catalogue users read:

- ``_base``: :class:`NoetaError`, the root.
- ``_configuration``: what a task is given or needs (options, registrations, policies, payload
  sizes, resources, scopes); no model can fix these.
- ``_steps``: one attempt of a step failed (provider, tool, resource, MCP server), retried or not.
- ``_storage``: the content store could not take a body, or a body it holds is missing or altered.
- ``_limits``: a limit was reached (attempts, a task's budget, an API key's quota).
- ``_tasks``: what a client meets reaching a task (the cluster, a task's end).
- ``_schedules``: what a client meets managing schedules.
"""

from __future__ import annotations

from typing import Any

from noeta.errors._base import NoetaError
from noeta.errors._configuration import (
    ConfigurationError,
    EncryptionKeyError,
    GuardNotRegisteredError,
    McpServerNotAllowedError,
    McpUrlNotAllowedError,
    OutputModelNotRegisteredError,
    PayloadTooLargeError,
    PolicyDecisionError,
    PolicyError,
    PolicyLoadError,
    ProviderNotRegisteredError,
    ResourceNotFoundError,
    ScopeError,
    ToolDefinitionError,
    ToolIdentityMismatchError,
    ToolNotRegisteredError,
    ValidatorNotRegisteredError,
)
from noeta.errors._limits import AttemptsExhaustedError, BudgetExceededError, QuotaExceededError
from noeta.errors._steps import (
    ContextLengthError,
    McpAuthError,
    McpInputRequiredError,
    McpLoginRequiredError,
    McpSamplingNotAllowedError,
    McpSamplingRequiredError,
    McpServerError,
    ProviderError,
    ProviderResponseError,
    ResourceError,
    ToolInputError,
    ToolRetryableError,
    ToolTimeoutError,
    WorkerBusyError,
)
from noeta.errors._schedules import ScheduleAlreadyExistsError, ScheduleNotFoundError
from noeta.errors._storage import ContentIntegrityError, ContentMissingError, ContentStoreError
from noeta.errors._tasks import (
    ApprovalNotPendingError,
    ExportFormatError,
    ServerStartError,
    TaskAlreadyExistsError,
    TaskCancelledError,
    TaskFailedError,
    TaskNotFoundError,
    TaskBusyError,
    TaskNotOpenError,
    TemporalUnavailableError,
    TurnNotFoundError,
)

#: Every error of the catalogue by class name: the ``type`` it travels under as an ApplicationError.
_BY_NAME: dict[str, type[NoetaError]] = {
    name: value
    for name, value in list(globals().items())
    if isinstance(value, type) and issubclass(value, NoetaError) and value is not NoetaError
}


def error_type_named(name: str | None) -> type[NoetaError] | None:
    """The Noeta error class whose name is ``name`` (an ``ApplicationError.type``), if any."""
    return _BY_NAME.get(name or "")


def rebuild_error(type_name: str | None, message: str, details: Any) -> NoetaError | None:
    """Rebuild a typed Noeta error from an ApplicationError's type, message and first detail."""
    cls = error_type_named(type_name)
    if cls is None:
        return None
    return cls.from_details(message, details if isinstance(details, dict) else {})


__all__ = [
    "ApprovalNotPendingError",
    "AttemptsExhaustedError",
    "BudgetExceededError",
    "ConfigurationError",
    "ContentIntegrityError",
    "ContentMissingError",
    "ContentStoreError",
    "ContextLengthError",
    "EncryptionKeyError",
    "ExportFormatError",
    "GuardNotRegisteredError",
    "McpAuthError",
    "McpInputRequiredError",
    "McpLoginRequiredError",
    "McpSamplingNotAllowedError",
    "McpSamplingRequiredError",
    "McpServerError",
    "McpServerNotAllowedError",
    "McpUrlNotAllowedError",
    "NoetaError",
    "OutputModelNotRegisteredError",
    "PayloadTooLargeError",
    "PolicyDecisionError",
    "PolicyError",
    "PolicyLoadError",
    "ProviderError",
    "ProviderNotRegisteredError",
    "ProviderResponseError",
    "QuotaExceededError",
    "ResourceError",
    "ResourceNotFoundError",
    "ScheduleAlreadyExistsError",
    "ScheduleNotFoundError",
    "ScopeError",
    "ServerStartError",
    "TaskCancelledError",
    "TaskFailedError",
    "TaskNotFoundError",
    "TaskAlreadyExistsError",
    "TaskBusyError",
    "TaskNotOpenError",
    "TemporalUnavailableError",
    "ToolDefinitionError",
    "ToolIdentityMismatchError",
    "ToolInputError",
    "ToolNotRegisteredError",
    "ToolRetryableError",
    "TurnNotFoundError",
    "ToolTimeoutError",
    "ValidatorNotRegisteredError",
    "WorkerBusyError",
    "error_type_named",
    "rebuild_error",
]
