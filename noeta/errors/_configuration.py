"""Errors in what a task is given or needs: options, registrations, policies, payload sizes,
resources and scopes. No model can fix them; most are raised before any token is spent."""

from __future__ import annotations

from collections.abc import Sequence

from noeta.errors._base import NoetaError


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


class ProviderNotRegisteredError(NoetaError):
    """A task names a provider that the worker executing it does not have."""


class PolicyLoadError(NoetaError):
    """The task's policy cannot be imported or constructed inside the workflow."""


class PolicyError(NoetaError):
    """A custom policy's ``decide`` raised; the task fails with the policy's error."""


class PolicyDecisionError(PolicyError):
    """A custom policy's ``decide`` returned something that is not a Decision (``CallModel``,
    ``CallTools``, ``SpawnSubtask`` or ``Finish``); the task fails, naming the type it got."""


class PayloadTooLargeError(NoetaError):
    """An input is larger than Temporal accepts in one payload; nothing was started."""


class McpServerNotAllowedError(ConfigurationError):
    """A worker refuses an MCP server configuration: a stdio command it does not allow
    (``NOETA_MCP_COMMANDS``), or a ``${NAME}`` reference it cannot resolve."""


class McpUrlNotAllowedError(McpServerNotAllowedError):
    """An MCP server URL is refused: not on the allow-list (``NOETA_MCP_URLS``), a private,
    loopback or link-local address no pattern names, or credentials inside the URL. Raised where
    the task is started (before anything connects) and again on the worker; ``url`` is the URL
    without any credentials."""

    _detail_defaults = {"url": ""}

    def __init__(self, message: str, url: str = "") -> None:
        """``message`` says why and what an operator can do; ``url``: the refused URL, redacted."""
        super().__init__(message)
        self.url = url


class EncryptionKeyError(ConfigurationError):
    """Encryption keys are malformed, or a payload or stored body names a key this process does
    not have (add the old key to ``NOETA_ENCRYPTION_KEYS`` after the active one): ``key_id`` names
    that key when one is known."""

    _detail_defaults = {"key_id": None}

    def __init__(self, message: str, key_id: str | None = None) -> None:
        """``message`` says what failed and what to do; ``key_id`` is the key it needs, if known."""
        super().__init__(message)
        self.key_id = key_id


class ResourceNotFoundError(NoetaError):
    """A resource the task needs (``expect_resource(key)`` or ``@tool(resources=[...])``) is not
    provided by the task, a parent that exposes it, the run or the worker. Raised before the first
    model call when a tool declares it; inside a tool it fails the task (the model cannot fix it)."""

    _detail_defaults = {"key": ""}

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


class ScopeError(NoetaError):
    """The task's scope (``equip_scope`` data merged over its parents') does not satisfy the schema
    that ``expect_scope`` or ``Options.scope_schema`` declares; ``keys`` names the missing or
    invalid keys (dotted paths). Raised before the first model call when the schema is declared."""

    _detail_defaults = {"keys": ()}

    def __init__(self, message: str, keys: Sequence[str] | None = None) -> None:
        super().__init__(message)
        self.keys = list(keys or [])
