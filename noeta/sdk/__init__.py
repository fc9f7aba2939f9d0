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
    "ScheduleInfo": "noeta.client.schedule_info",
    "ScheduleRun": "noeta.client.schedule_info",
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
    "McpInputRequiredError": "noeta.errors",
    "McpLoginRequiredError": "noeta.errors",
    "McpSamplingNotAllowedError": "noeta.errors",
    "McpSamplingRequiredError": "noeta.errors",
    "McpServerError": "noeta.errors",
    "McpServerNotAllowedError": "noeta.errors",
    "McpUrlNotAllowedError": "noeta.errors",
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
    "ScheduleAlreadyExistsError": "noeta.errors",
    "ScheduleNotFoundError": "noeta.errors",
    "ScopeError": "noeta.errors",
    "ServerStartError": "noeta.errors",
    "TaskCancelledError": "noeta.errors",
    "TaskFailedError": "noeta.errors",
    "TaskNotFoundError": "noeta.errors",
    "TaskAlreadyExistsError": "noeta.errors",
    "TaskBusyError": "noeta.errors",
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

# Type checkers see each name imported ``as`` itself: an explicit re-export, as ``__all__`` below is
# derived and they do not evaluate it.
if TYPE_CHECKING:
    from noeta.builtins.memory.impl import MemoryStore as MemoryStore
    from noeta.client.client import AsyncClient as AsyncClient
    from noeta.client.schedule_info import ScheduleInfo as ScheduleInfo, ScheduleRun as ScheduleRun
    from noeta.client.messages import (
        AssistantMessage as AssistantMessage,
        ContextCompactedView as ContextCompactedView,
        InjectedMessage as InjectedMessage,
        Result as Result,
        ToolResultView as ToolResultView,
        ToolUse as ToolUse,
        UserMessage as UserMessage,
        ViewItem as ViewItem,
        as_messages as as_messages,
    )
    from noeta.client.options import HostConfig as HostConfig, Options as Options, SubAgent as SubAgent
    from noeta.client.task_input import Fallback as Fallback
    from noeta.protocols.fallback import ProviderUsage as ProviderUsage
    from noeta.client.projection import project as project
    from noeta.client.sync import Client as Client
    from noeta.client.wire import envelope_to_dict as envelope_to_dict
    from noeta.context.content_channel import ContentKindSpec as ContentKindSpec
    from noeta.context.content_store import ContentStore as ContentStore, LocalContentStore as LocalContentStore
    from noeta.errors import (
        ApprovalNotPendingError as ApprovalNotPendingError,
        AttemptsExhaustedError as AttemptsExhaustedError,
        BudgetExceededError as BudgetExceededError,
        ConfigurationError as ConfigurationError,
        ContentIntegrityError as ContentIntegrityError,
        ContentMissingError as ContentMissingError,
        ContentStoreError as ContentStoreError,
        ContextLengthError as ContextLengthError,
        EncryptionKeyError as EncryptionKeyError,
        ExportFormatError as ExportFormatError,
        GuardNotRegisteredError as GuardNotRegisteredError,
        McpAuthError as McpAuthError,
        McpInputRequiredError as McpInputRequiredError,
        McpLoginRequiredError as McpLoginRequiredError,
        McpSamplingNotAllowedError as McpSamplingNotAllowedError,
        McpSamplingRequiredError as McpSamplingRequiredError,
        McpServerError as McpServerError,
        McpServerNotAllowedError as McpServerNotAllowedError,
        McpUrlNotAllowedError as McpUrlNotAllowedError,
        NoetaError as NoetaError,
        OutputModelNotRegisteredError as OutputModelNotRegisteredError,
        PayloadTooLargeError as PayloadTooLargeError,
        PolicyDecisionError as PolicyDecisionError,
        PolicyError as PolicyError,
        PolicyLoadError as PolicyLoadError,
        ProviderError as ProviderError,
        ProviderNotRegisteredError as ProviderNotRegisteredError,
        ProviderResponseError as ProviderResponseError,
        QuotaExceededError as QuotaExceededError,
        ResourceError as ResourceError,
        ResourceNotFoundError as ResourceNotFoundError,
        ScheduleAlreadyExistsError as ScheduleAlreadyExistsError,
        ScheduleNotFoundError as ScheduleNotFoundError,
        ScopeError as ScopeError,
        ServerStartError as ServerStartError,
        TaskCancelledError as TaskCancelledError,
        TaskFailedError as TaskFailedError,
        TaskNotFoundError as TaskNotFoundError,
        TaskAlreadyExistsError as TaskAlreadyExistsError,
        TaskBusyError as TaskBusyError,
        TaskNotOpenError as TaskNotOpenError,
        TemporalUnavailableError as TemporalUnavailableError,
        ToolDefinitionError as ToolDefinitionError,
        ToolIdentityMismatchError as ToolIdentityMismatchError,
        ToolInputError as ToolInputError,
        ToolNotRegisteredError as ToolNotRegisteredError,
        ToolRetryableError as ToolRetryableError,
        ToolTimeoutError as ToolTimeoutError,
        TurnNotFoundError as TurnNotFoundError,
        ValidatorNotRegisteredError as ValidatorNotRegisteredError,
        WorkerBusyError as WorkerBusyError,
    )
    from noeta.worker.plugin import NoetaPlugin as NoetaPlugin, NoetaWorkerPlugin as NoetaWorkerPlugin
    from noeta.providers.pricing import ModelPrice as ModelPrice, PriceTable as PriceTable
    from noeta.protocols.activity_options import ActivityOptions as ActivityOptions
    from noeta.protocols.budget import CallCounts as CallCounts, UsageLimits as UsageLimits
    from noeta.protocols.compaction import Compaction as Compaction
    from noeta.protocols.resources import (
        ResourceCall as ResourceCall,
        ResourceSpec as ResourceSpec,
        equip_resource as equip_resource,
    )
    from noeta.protocols.scope import equip_scope as equip_scope
    from noeta.protocols.task import TaskResult as TaskResult
    from noeta.protocols.validation import Validator as Validator, expect_validator as expect_validator
    from noeta.providers.anthropic import AnthropicProvider as AnthropicProvider
    from noeta.providers.limits import ProviderLimit as ProviderLimit
    from noeta.providers.local import LocalModelProvider as LocalModelProvider
    from noeta.providers.openai import OpenAIProvider as OpenAIProvider
    from noeta.resources.context import (
        expect_resource as expect_resource,
        expect_scope as expect_scope,
        run_with as run_with,
    )
    from noeta.resources.instrument import ObservedCall as ObservedCall, instrument as instrument
    from noeta.sdk._query import QueryResult as QueryResult, aquery as aquery, query as query
    from noeta.sdk.images import image as image
    from noeta.sdk.tools import (
        DecoratedTool as DecoratedTool,
        SdkMcpServer as SdkMcpServer,
        create_sdk_mcp_server as create_sdk_mcp_server,
        tool as tool,
        tool_description as tool_description,
    )
    from noeta.config.tuning import WorkerTuning as WorkerTuning
    from noeta.worker import Registry as Registry


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


#: Every public name: the seed types and each lazily loaded name (one list each, above).
__all__ = [*_protocol_names, *_LAZY]
