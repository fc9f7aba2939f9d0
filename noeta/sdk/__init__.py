"""The public API: ``from noeta.sdk import ...``. Test doubles live in :mod:`noeta.sdk.testing`.

Everything a user constructs or catches is here: the client and options, tools, the providers
(Anthropic, OpenAI and compatible servers, the local model) and their limits, the Temporal plugins
and worker tuning, and every Noeta error. The modules that define them are implementation.

The seed's types (:mod:`noeta.protocols`) load with the package; every other name loads from its
module on first use (PEP 562). A worker whose tools module does ``from noeta.sdk import tool`` so
never imports the client side (connection, projection, query): about 5 MB and 0.1 s less per
process. Type checkers see the ordinary imports below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from noeta.protocols import *  # noqa: F403  (the seed types, re-exported)
from noeta.protocols import __all__ as _protocol_names

#: Each lazily loaded public name and the module that defines it.
_LAZY: dict[str, str] = {
    "AsyncClient": "noeta.client.client",
    "Client": "noeta.client.sync",
    "AssistantMessage": "noeta.client.messages",
    "InjectedMessage": "noeta.client.messages",
    "Result": "noeta.client.messages",
    "ToolResultView": "noeta.client.messages",
    "ToolUse": "noeta.client.messages",
    "UserMessage": "noeta.client.messages",
    "ViewItem": "noeta.client.messages",
    "ContextCompactedView": "noeta.client.messages",
    "Compaction": "noeta.protocols.compaction",
    "as_messages": "noeta.client.messages",
    "HostConfig": "noeta.client.options",
    "Options": "noeta.client.options",
    "SubAgent": "noeta.client.options",
    "Fallback": "noeta.client.task_input",
    "ProviderUsage": "noeta.protocols.fallback",
    "project": "noeta.client.projection",
    "envelope_to_dict": "noeta.client.wire",
    "ContentKindSpec": "noeta.context.content_channel",
    "ContentStore": "noeta.context.content_store",
    "LocalContentStore": "noeta.context.content_store",
    "ApprovalNotPendingError": "noeta.errors",
    "AttemptsExhaustedError": "noeta.errors",
    "BudgetExceededError": "noeta.errors",
    "ConfigurationError": "noeta.errors",
    "ContentIntegrityError": "noeta.errors",
    "ContentMissingError": "noeta.errors",
    "ContentStoreError": "noeta.errors",
    "ContextLengthError": "noeta.errors",
    "EncryptionKeyError": "noeta.errors",
    "ExportFormatError": "noeta.errors",
    "GuardNotRegisteredError": "noeta.errors",
    "McpAuthError": "noeta.errors",
    "McpServerError": "noeta.errors",
    "McpServerNotAllowedError": "noeta.errors",
    "NoetaError": "noeta.errors",
    "OutputModelNotRegisteredError": "noeta.errors",
    "PayloadTooLargeError": "noeta.errors",
    "PolicyDecisionError": "noeta.errors",
    "PolicyError": "noeta.errors",
    "PolicyLoadError": "noeta.errors",
    "ProviderError": "noeta.errors",
    "ProviderNotRegisteredError": "noeta.errors",
    "ProviderResponseError": "noeta.errors",
    "QuotaExceededError": "noeta.errors",
    "ResourceError": "noeta.errors",
    "ResourceNotFoundError": "noeta.errors",
    "ScopeError": "noeta.errors",
    "ServerStartError": "noeta.errors",
    "TaskCancelledError": "noeta.errors",
    "TaskFailedError": "noeta.errors",
    "TaskNotFoundError": "noeta.errors",
    "TaskAlreadyExistsError": "noeta.errors",
    "TaskNotOpenError": "noeta.errors",
    "TemporalUnavailableError": "noeta.errors",
    "ToolDefinitionError": "noeta.errors",
    "ToolIdentityMismatchError": "noeta.errors",
    "ToolInputError": "noeta.errors",
    "ToolNotRegisteredError": "noeta.errors",
    "ToolRetryableError": "noeta.errors",
    "ToolTimeoutError": "noeta.errors",
    "TurnNotFoundError": "noeta.errors",
    "ValidatorNotRegisteredError": "noeta.errors",
    "WorkerBusyError": "noeta.errors",
    "NoetaPlugin": "noeta.worker.plugin",
    "NoetaWorkerPlugin": "noeta.worker.plugin",
    "ModelPrice": "noeta.providers.pricing",
    "PriceTable": "noeta.providers.pricing",
    "ActivityOptions": "noeta.protocols.activity_options",
    "CallCounts": "noeta.protocols.budget",
    "UsageLimits": "noeta.protocols.budget",
    "ResourceCall": "noeta.protocols.resources",
    "ResourceSpec": "noeta.protocols.resources",
    "equip_resource": "noeta.protocols.resources",
    "equip_scope": "noeta.protocols.scope",
    "TaskResult": "noeta.protocols.task",
    "Validator": "noeta.protocols.validation",
    "expect_validator": "noeta.protocols.validation",
    "expect_resource": "noeta.resources.context",
    "expect_scope": "noeta.resources.context",
    "run_with": "noeta.resources.context",
    "ObservedCall": "noeta.resources.instrument",
    "instrument": "noeta.resources.instrument",
    "AnthropicProvider": "noeta.providers.anthropic",
    "ProviderLimit": "noeta.providers.limits",
    "LocalModelProvider": "noeta.providers.local",
    "OpenAIProvider": "noeta.providers.openai",
    "image": "noeta.sdk.images",
    "QueryResult": "noeta.sdk._query",
    "aquery": "noeta.sdk._query",
    "query": "noeta.sdk._query",
    "DecoratedTool": "noeta.sdk.tools",
    "SdkMcpServer": "noeta.sdk.tools",
    "create_sdk_mcp_server": "noeta.sdk.tools",
    "tool": "noeta.sdk.tools",
    "tool_description": "noeta.sdk.tools",
    "WorkerTuning": "noeta.config.tuning",
    "Registry": "noeta.worker",
    "MemoryStore": "noeta.builtins.memory.impl",
}

if TYPE_CHECKING:
    from noeta.builtins.memory.impl import MemoryStore
    from noeta.client.client import AsyncClient
    from noeta.client.messages import (
        AssistantMessage,
        ContextCompactedView,
        InjectedMessage,
        Result,
        ToolResultView,
        ToolUse,
        UserMessage,
        ViewItem,
        as_messages,
    )
    from noeta.client.options import HostConfig, Options, SubAgent
    from noeta.client.task_input import Fallback
    from noeta.protocols.fallback import ProviderUsage
    from noeta.client.projection import project
    from noeta.client.sync import Client
    from noeta.client.wire import envelope_to_dict
    from noeta.context.content_channel import ContentKindSpec
    from noeta.context.content_store import ContentStore, LocalContentStore
    from noeta.errors import (
        ApprovalNotPendingError,
        AttemptsExhaustedError,
        BudgetExceededError,
        ConfigurationError,
        ContentIntegrityError,
        ContentMissingError,
        ContentStoreError,
        ContextLengthError,
        EncryptionKeyError,
        ExportFormatError,
        GuardNotRegisteredError,
        McpAuthError,
        McpServerError,
        McpServerNotAllowedError,
        NoetaError,
        OutputModelNotRegisteredError,
        PayloadTooLargeError,
        PolicyDecisionError,
        PolicyError,
        PolicyLoadError,
        ProviderError,
        ProviderNotRegisteredError,
        ProviderResponseError,
        QuotaExceededError,
        ResourceError,
        ResourceNotFoundError,
        ScopeError,
        ServerStartError,
        TaskCancelledError,
        TaskFailedError,
        TaskNotFoundError,
        TaskAlreadyExistsError,
        TaskNotOpenError,
        TemporalUnavailableError,
        ToolDefinitionError,
        ToolIdentityMismatchError,
        ToolInputError,
        ToolNotRegisteredError,
        ToolRetryableError,
        ToolTimeoutError,
        TurnNotFoundError,
        ValidatorNotRegisteredError,
        WorkerBusyError,
    )
    from noeta.worker.plugin import NoetaPlugin, NoetaWorkerPlugin
    from noeta.providers.pricing import ModelPrice, PriceTable
    from noeta.protocols.activity_options import ActivityOptions
    from noeta.protocols.budget import CallCounts, UsageLimits
    from noeta.protocols.compaction import Compaction
    from noeta.protocols.resources import ResourceCall, ResourceSpec, equip_resource
    from noeta.protocols.scope import equip_scope
    from noeta.protocols.task import TaskResult
    from noeta.protocols.validation import Validator, expect_validator
    from noeta.providers.anthropic import AnthropicProvider
    from noeta.providers.limits import ProviderLimit
    from noeta.providers.local import LocalModelProvider
    from noeta.providers.openai import OpenAIProvider
    from noeta.resources.context import expect_resource, expect_scope, run_with
    from noeta.resources.instrument import ObservedCall, instrument
    from noeta.sdk._query import QueryResult, aquery, query
    from noeta.sdk.images import image
    from noeta.sdk.tools import DecoratedTool, SdkMcpServer, create_sdk_mcp_server, tool, tool_description
    from noeta.config.tuning import WorkerTuning
    from noeta.worker import Registry


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'noeta.sdk' has no attribute {name!r}")
    # Through the import hook: inside a workflow that is the sandbox's, which passes Noeta's
    # modules through (tests/test_plugin.py checks a sandboxed policy gets the worker's object).
    value = getattr(__import__(module, fromlist=[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    *_protocol_names,
    "ActivityOptions", "AssistantMessage", "AsyncClient", "AttemptsExhaustedError", "BudgetExceededError", "CallCounts", "Client",
    "ConfigurationError", "ModelPrice", "PriceTable", "QuotaExceededError", "UsageLimits",
    "ContentIntegrityError", "ContentKindSpec", "ContentMissingError", "ContentStore", "ContentStoreError",
    "Compaction", "ContextCompactedView", "Fallback", "ProviderUsage", "ContextLengthError", "DecoratedTool", "HostConfig",
    "InjectedMessage", "LocalContentStore", "MemoryStore", "NoetaError", "Options",
    "PayloadTooLargeError", "ProviderError", "QueryResult", "Registry", "Result", "SdkMcpServer",
    "TaskCancelledError", "TaskFailedError", "TaskNotFoundError", "TaskNotOpenError", "TaskAlreadyExistsError", "TaskResult",
    "ToolIdentityMismatchError", "ToolNotRegisteredError", "ToolResultView", "ToolRetryableError",
    "ToolUse", "UserMessage", "Validator", "ViewItem", "aquery", "expect_validator", "as_messages", "create_sdk_mcp_server",
    "envelope_to_dict", "image", "project", "query", "tool", "tool_description",
    "ObservedCall", "ResourceCall", "ResourceError", "ResourceNotFoundError", "ResourceSpec", "ScopeError", "SubAgent",
    "equip_resource", "equip_scope", "expect_resource", "expect_scope", "instrument", "run_with",
    "AnthropicProvider", "ApprovalNotPendingError", "EncryptionKeyError", "ExportFormatError", "GuardNotRegisteredError",
    "LocalModelProvider", "McpAuthError", "McpServerError", "McpServerNotAllowedError", "NoetaPlugin", "NoetaWorkerPlugin",
    "OpenAIProvider", "OutputModelNotRegisteredError", "PolicyDecisionError", "PolicyError",
    "PolicyLoadError", "ProviderLimit", "ProviderNotRegisteredError", "ProviderResponseError",
    "ServerStartError", "TemporalUnavailableError", "ToolDefinitionError", "ToolInputError",
    "ToolTimeoutError", "TurnNotFoundError", "ValidatorNotRegisteredError", "WorkerBusyError", "WorkerTuning",
]
