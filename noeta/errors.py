"""Every user-facing error Noeta raises, in one hierarchy.

Pure module (no I/O, no Temporal imports) so workflows, activities and the client can all share it.
Errors that cross the workflow boundary travel as Temporal ``ApplicationError`` whose ``type`` is the
class name below and whose single detail is ``to_details()``; :func:`from_application_error` turns
them back into these typed exceptions on the client side.

One module on purpose, longer than most: the whole hierarchy in one place is the catalogue users read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


class NoetaError(Exception):
    """Base class of all Noeta errors."""

    #: When True, Temporal must not retry an activity that raised this error.
    non_retryable: ClassVar[bool] = True

    def to_details(self) -> dict[str, Any]:
        return {"message": str(self)}

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "NoetaError":
        return cls(details.get("message", message))


class ConfigurationError(NoetaError):
    """Options or environment are invalid; raised before any task starts or any token is spent."""


class ToolDefinitionError(NoetaError, TypeError):
    """A tool was declared incorrectly (missing version, bad schema, not a DecoratedTool...)."""


class ToolNotRegisteredError(NoetaError):
    """A task names a tool that the worker executing it does not have."""


class ToolIdentityMismatchError(NoetaError):
    """The worker's tool differs (name + version + input_schema) from the one the task recorded."""


class ValidatorNotRegisteredError(NoetaError):
    """A task names a validator that the worker executing it does not have."""


class GuardNotRegisteredError(NoetaError):
    """A task names a guard that the worker executing it does not have."""


class OutputModelNotRegisteredError(NoetaError):
    """A task names an output model (``module:QualName``) that the worker executing it does not have."""


class ApprovalNotPendingError(NoetaError):
    """An approval names an action that is not waiting for one (unknown, or already decided)."""


class ProviderNotRegisteredError(NoetaError):
    """A task names a provider that the worker executing it does not have."""


class PolicyLoadError(NoetaError):
    """The task's policy cannot be imported or constructed inside the workflow."""


class PolicyError(NoetaError):
    """A custom policy's ``decide`` raised; the task fails with the policy's error."""


class PayloadTooLargeError(NoetaError):
    """An input is larger than Temporal accepts in one payload; nothing was started."""


class TaskNotFoundError(NoetaError):
    """No task with that id exists on the Temporal cluster."""


class TaskNotOpenError(NoetaError):
    """A goal was sent to a task that has ended or was not started with ``keep_open=True``."""


class TaskCancelledError(NoetaError):
    """The task was cancelled before it produced a result."""


class TaskFailedError(NoetaError):
    """The task's workflow failed for a reason without a more specific Noeta error type."""


class TemporalUnavailableError(NoetaError):
    """The configured Temporal cluster (TEMPORAL_ADDRESS) cannot be reached."""


class ServerStartError(NoetaError):
    """The embedded Temporal dev server could not be started."""


@dataclass(eq=False)
class ProviderError(NoetaError):
    """An LLM provider answered with an error or could not be reached.

    ``retryable`` follows the classification in :mod:`noeta.providers.errors`: 408, 409, 429 and 5xx,
    connection errors and timeouts are retried; 400, 401, 403, 404 and 422 are not.
    """

    provider: str
    message: str
    status: int | None = None
    retryable: bool = False
    #: Seconds the provider asked us to wait (``retry-after`` / ``retry-after-ms``).
    retry_after: float | None = None

    def __post_init__(self) -> None:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        super().__init__(f"provider {self.provider!r}{status}: {self.message}")

    def to_details(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "message": self.message,
            "status": self.status,
            "retryable": self.retryable,
            "retry_after": self.retry_after,
        }

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "ProviderError":
        return cls(
            provider=details.get("provider", "?"),
            message=details.get("message", message),
            status=details.get("status"),
            retryable=bool(details.get("retryable", False)),
            retry_after=details.get("retry_after"),
        )


class ContextLengthError(ProviderError):
    """The request does not fit the model's context window; never retried."""


class ProviderResponseError(ProviderError):
    """A provider answered 2xx with a body that does not have its API's shape (no choices, a null
    message, tool calls that are not a list...). Retried: such bodies are usually a server's or
    proxy's passing fault, and the attempt budget bounds it."""


class ToolTimeoutError(NoetaError):
    """A tool call's attempt did not finish within its timeout; retried per the tool's retries."""

    non_retryable = False


class WorkerBusyError(NoetaError):
    """Every thread this worker has for synchronous tools is busy (some may be held by hung calls);
    the call waits and is retried, on this worker or another, without using up its retries."""

    non_retryable = False


@dataclass(eq=False)
class AttemptsExhaustedError(NoetaError):
    """Every attempt allowed by ``max_retries`` failed.

    ``attempts`` is the number of attempts made (``max_retries + 1`` when the budget ran out),
    ``issues`` one message per failed attempt in order.
    """

    attempts: int
    issues: list[str] = field(default_factory=list)
    #: "provider", "schema", "validator" or "rate_limit" (the call waited longer than
    #: ``rate_limit_wait_seconds`` in all): what failed last.
    last_failure_type: str = "provider"
    last_data: Any = None
    last_raw_text: str | None = None

    def __post_init__(self) -> None:
        last = f": {self.issues[-1]}" if self.issues else ""
        super().__init__(f"All attempts exhausted after {self.attempts} attempt(s){last}")

    def to_details(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "issues": list(self.issues),
            "last_failure_type": self.last_failure_type,
            "last_data": self.last_data,
            "last_raw_text": self.last_raw_text,
        }

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "AttemptsExhaustedError":
        return cls(
            attempts=int(details.get("attempts", 0)),
            issues=list(details.get("issues", [])),
            last_failure_type=details.get("last_failure_type", "provider"),
            last_data=details.get("last_data"),
            last_raw_text=details.get("last_raw_text"),
        )


@dataclass(eq=False)
class BudgetExceededError(NoetaError):
    """A task reached one of its ``UsageLimits`` and stopped before the call that would pass it.

    ``limit`` names the limit (``max_cost_usd``, ``max_tool_calls_per_tool[search]``...),
    ``allowed`` its value and ``used`` the task's total at that moment; ``spend`` holds all the
    task's totals then (``usage``: tokens and cost, ``counts``: model and tool calls), sub-agents
    included.
    """

    limit: str
    allowed: float
    used: float
    spend: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    def __post_init__(self) -> None:
        super().__init__(self.message or f"budget exceeded: {self.limit} is {self.allowed:g}, {self.used:g} used")

    def to_details(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "allowed": self.allowed,
            "used": self.used,
            "spend": self.spend,
            "message": self.message,
        }

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "BudgetExceededError":
        return cls(
            limit=str(details.get("limit", "?")),
            allowed=float(details.get("allowed", 0)),
            used=float(details.get("used", 0)),
            spend=dict(details.get("spend") or {}),
            message=details.get("message") or message,
        )

    @property
    def cost_usd(self) -> float:
        """The task's cost when it stopped."""
        return float(self.spend.get("usage", {}).get("cost_usd", 0.0))


@dataclass(eq=False)
class QuotaExceededError(NoetaError):
    """An API key of ``noeta serve`` has spent its daily quota; the request was refused and
    nothing was started (HTTP 429). The quota renews at midnight UTC."""

    quota: str
    """Which quota: ``daily_usd``."""
    key_id: str
    """The key's id (a hash prefix, never the key)."""
    allowed_usd: float
    spent_usd: float
    day: str
    """The UTC day the spend is counted for (YYYY-MM-DD)."""

    def __post_init__(self) -> None:
        super().__init__(
            f"API key {self.key_id} has spent ${self.spent_usd:.4f} of its ${self.allowed_usd:.4f} {self.quota} "
            f"quota on {self.day} (UTC); requests that start or continue tasks are refused until the next day"
        )

    def to_details(self) -> dict[str, Any]:
        return {
            "quota": self.quota,
            "key_id": self.key_id,
            "allowed_usd": self.allowed_usd,
            "spent_usd": self.spent_usd,
            "day": self.day,
        }

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "QuotaExceededError":
        return cls(
            quota=str(details.get("quota", "daily_usd")),
            key_id=str(details.get("key_id", "?")),
            allowed_usd=float(details.get("allowed_usd", 0)),
            spent_usd=float(details.get("spent_usd", 0)),
            day=str(details.get("day", "")),
        )


class ToolRetryableError(NoetaError):
    """Raise from a tool to have the worker retry the call (per the tool's retry settings)
    instead of returning the failure to the model."""

    non_retryable = False


class ResourceNotFoundError(NoetaError):
    """A resource the task needs (``expect_resource(key)`` or ``@tool(resources=[...])``) is not
    provided by the task, a parent that exposes it, the run or the worker. Raised before the first
    model call when a tool declares it; inside a tool it fails the task (the model cannot fix it)."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key

    def to_details(self) -> dict[str, Any]:
        return {"message": str(self), "key": self.key}

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "ResourceNotFoundError":
        return cls(details.get("message", message), str(details.get("key", "")))


class ResourceError(NoetaError):
    """A resource's ``create`` failed (retried like any step: a database may be restarting), or
    resources depend on each other in a cycle."""

    non_retryable = False


class ScopeError(NoetaError):
    """The task's scope (``equip_scope`` data merged over its parents') does not satisfy the schema
    that ``expect_scope`` or ``Options.scope_schema`` declares; ``keys`` names the missing or
    invalid keys (dotted paths). Raised before the first model call when the schema is declared."""

    def __init__(self, message: str, keys: list[str] | None = None) -> None:
        super().__init__(message)
        self.keys = list(keys or [])

    def to_details(self) -> dict[str, Any]:
        return {"message": str(self), "keys": list(self.keys)}

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "ScopeError":
        return cls(details.get("message", message), list(details.get("keys", [])))


class ToolInputError(NoetaError, ValueError):
    """A built-in tool refused its arguments (an expression it cannot evaluate, a path outside the
    workspace); the model gets the message back as a failed tool result."""


class McpServerError(NoetaError):
    """A remote MCP server could not be started, reached or asked (it crashed, the connection
    broke, it timed out); the worker retries, reconnecting or restarting the server."""

    non_retryable = False


class McpServerNotAllowedError(ConfigurationError):
    """A worker refuses an MCP server configuration: a stdio command it does not allow
    (``NOETA_MCP_COMMANDS``), or a ``${NAME}`` reference it cannot resolve."""


_BY_NAME: dict[str, type[NoetaError]] = {
    cls.__name__: cls
    for cls in (
        ConfigurationError,
        ToolDefinitionError,
        ToolNotRegisteredError,
        ToolIdentityMismatchError,
        ProviderNotRegisteredError,
        ValidatorNotRegisteredError,
        GuardNotRegisteredError,
        OutputModelNotRegisteredError,
        ApprovalNotPendingError,
        PolicyLoadError,
        PolicyError,
        PayloadTooLargeError,
        TaskNotFoundError,
        TaskNotOpenError,
        TaskCancelledError,
        TaskFailedError,
        TemporalUnavailableError,
        ProviderError,
        ContextLengthError,
        ProviderResponseError,
        ToolTimeoutError,
        WorkerBusyError,
        AttemptsExhaustedError,
        BudgetExceededError,
        QuotaExceededError,
        ToolRetryableError,
        ToolInputError,
        McpServerError,
        McpServerNotAllowedError,
        ResourceNotFoundError,
        ResourceError,
        ScopeError,
    )
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


class EncryptionKeyError(ConfigurationError):
    """Encryption keys are malformed, or a payload or stored body names a key this process does
    not have (add the old key to ``NOETA_ENCRYPTION_KEYS`` after the active one)."""


_BY_NAME[EncryptionKeyError.__name__] = EncryptionKeyError
