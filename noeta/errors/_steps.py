"""Errors of one step's attempt (a model call, a tool call, a resource or an MCP server) and
whether the worker retries it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from noeta.errors._base import FieldsError, NoetaError
from noeta.errors._refused_sizes import refused_sizes


@dataclass(eq=False)
class ProviderError(FieldsError):
    """An LLM provider answered with an error or could not be reached.

    ``retryable`` follows the classification in :mod:`noeta.providers.errors`: 408, 409, 429 and 5xx,
    connection errors and timeouts are retried; 400, 401, 403, 404 and 422 are not.
    """

    _detail_defaults = {"provider": "?"}

    provider: str
    message: str
    status: int | None = None
    retryable: bool = False
    #: Seconds the provider asked us to wait (``retry-after`` / ``retry-after-ms``).
    retry_after: float | None = None
    #: The provider's own error type from its error body (``rate_limit_error``,
    #: ``insufficient_quota``...), when it named one: a failed call's span says it (``error.type``).
    error_type: str | None = None

    def __post_init__(self) -> None:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        super().__init__(f"provider {self.provider!r}{status}: {self.message}")



@dataclass(eq=False)
class ContextLengthError(ProviderError):
    """The request does not fit the model's context window; never retried. The sizes the
    provider's message states are read from it when not given (noeta.errors._refused_sizes): the
    workflow learns the window from them (noeta.workflows.compaction)."""

    requested_tokens: int | None = None
    """The refused request's size in tokens, as the provider counted it (None: it did not say)."""
    limit_tokens: int | None = None
    """The model's context window as the provider stated it (None: it did not say)."""

    def __post_init__(self) -> None:
        requested, limit = refused_sizes(self.message)
        self.requested_tokens = self.requested_tokens if self.requested_tokens is not None else requested
        self.limit_tokens = self.limit_tokens if self.limit_tokens is not None else limit
        super().__post_init__()


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


class ToolRetryableError(NoetaError):
    """Raise from a tool to have the worker retry the call (per the tool's retry settings)
    instead of returning the failure to the model."""

    non_retryable = False


class ToolInputError(NoetaError, ValueError):
    """A built-in tool refused its arguments (an expression it cannot evaluate, a path outside the
    workspace); the model gets the message back as a failed tool result."""


class ResourceError(NoetaError):
    """A resource's ``create`` failed (retried like any step: a database may be restarting), or
    resources depend on each other in a cycle."""

    non_retryable = False


class McpServerError(NoetaError):
    """A remote MCP server could not be started, reached or asked (it crashed, the connection
    broke, it timed out); the worker retries, reconnecting or restarting the server."""

    non_retryable = False


class McpAuthError(McpServerError):
    """A remote MCP server refused the worker's authorization (HTTP 401 or 403) or its OAuth flow
    could not complete: names the server's ``alias`` and ``url`` and what to do (log in again,
    ask for a missing scope, fix the client's credentials). Not retried: another attempt with the
    same credentials would be refused the same way."""

    non_retryable = True
    _detail_defaults = {"alias": "", "url": "", "status": None}

    def __init__(self, message: str, alias: str = "", url: str = "", status: int | None = None) -> None:
        """``message`` says what failed and what to do; ``status`` is the server's HTTP status, if any."""
        super().__init__(message)
        self.alias, self.url, self.status = alias, url, status


class McpLoginRequiredError(McpAuthError):
    """A user's login (``authorization_code``) lacks a scope a tool call needs (``403
    insufficient_scope``): a worker cannot log in for a person, so the call stops, the task waits
    for the operator to log in again (a pending approval of kind ``login`` naming the command) and
    makes the call again once told. ``request`` is what the login needs (server alias, url, scope,
    command)."""

    _detail_defaults = {"alias": "", "url": "", "status": None, "request": None}

    def __init__(
        self, message: str, alias: str = "", url: str = "", status: int | None = None,
        request: dict[str, Any] | None = None,
    ) -> None:
        """``request``: ``{"server", "url", "scope", "command"}``."""
        super().__init__(message, alias, url, status)
        self.request = request


class _McpRequestError(McpServerError):
    """A tool call that stopped because its MCP server asked something the task answers (a person
    or the task's model); ``request`` is what the server sent. Not retried: the answer comes from
    the task, not another attempt."""

    non_retryable = True
    _detail_defaults = {"request": None}

    def __init__(self, message: str, request: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.request = request


class McpInputRequiredError(_McpRequestError):
    """A remote MCP server asked a person for input during a tool call (``elicitation/create``):
    the call stops, the task waits for the answer (a pending approval of kind ``elicitation``) and
    makes the call again with it. ``request`` is what the server asked (server alias, message,
    requested schema: ``{"server", "message", "requested_schema"}`` as the server sent them).
    Not retried: the answer comes from a person, not another attempt."""


class McpSamplingRequiredError(_McpRequestError):
    """A remote MCP server asked the task's model during a tool call (``sampling/createMessage``):
    the call stops, the task makes the model call (a recorded model call of the task) and makes the
    tool call again with its answer. ``request`` is what the server sent (server alias, messages,
    system prompt, max tokens: the server's ``sampling/createMessage`` parameters and its
    ``server`` alias). Not retried: the answer comes from the task, not another attempt."""


class McpSamplingNotAllowedError(McpServerError):
    """A remote MCP server asked the task's model during a tool call, and its configuration does
    not allow it: the request was refused and the call fails. Allow it with ``"sampling": true`` on
    the server's entry in ``Options.mcp_servers`` (its requests are then model calls of the task,
    shown to its guards and counted against its budget)."""

    non_retryable = True
    _detail_defaults = {"alias": ""}

    def __init__(self, message: str, alias: str = "") -> None:
        """``alias``: the server's (``mcp_servers`` key)."""
        super().__init__(message)
        self.alias = alias
