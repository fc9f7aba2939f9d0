"""The public API: ``from noeta.sdk import ...``. Test doubles live in :mod:`noeta.sdk.testing`."""

from typing import Any

from noeta.client.client import AsyncClient, Client
from noeta.client.messages import (
    AssistantMessage,
    InjectedMessage,
    Result,
    ToolResultView,
    ToolUse,
    UserMessage,
    ViewItem,
    as_messages,
)
from noeta.client.options import HostConfig, Options, SubAgent
from noeta.client.projection import project
from noeta.client.wire import envelope_to_dict
from noeta.context.content_channel import ContentKindSpec
from noeta.context.content_store import ContentStore, LocalContentStore
from noeta.errors import (
    AttemptsExhaustedError,
    BudgetExceededError,
    ConfigurationError,
    ContextLengthError,
    NoetaError,
    PayloadTooLargeError,
    ProviderError,
    QuotaExceededError,
    ResourceError,
    ResourceNotFoundError,
    ScopeError,
    TaskCancelledError,
    TaskFailedError,
    TaskNotFoundError,
    TaskNotOpenError,
    ToolIdentityMismatchError,
    ToolNotRegisteredError,
    ToolRetryableError,
)
from noeta.pricing import ModelPrice, PriceTable
from noeta.protocols import *  # noqa: F403  (the seed types, re-exported)
from noeta.protocols import __all__ as _protocol_names
from noeta.protocols.activity_options import ActivityOptions
from noeta.protocols.budget import CallCounts, UsageLimits
from noeta.protocols.resources import ResourceCall, ResourceSpec, equip_resource
from noeta.protocols.scope import equip_scope
from noeta.protocols.task import TaskResult
from noeta.protocols.validation import Validator, expect_validator
from noeta.resources.context import expect_resource, expect_scope, run_with
from noeta.resources.instrument import ObservedCall, instrument
from noeta.sdk.images import image
from noeta.sdk.query import QueryResult, aquery, query
from noeta.sdk.tools import DecoratedTool, SdkMcpServer, create_sdk_mcp_server, tool
from noeta.worker import Registry


def __getattr__(name: str) -> Any:
    # MemoryStore is re-exported lazily: most programs never touch the memory pool.
    if name == "MemoryStore":
        from noeta.builtins.memory.impl import MemoryStore

        return MemoryStore
    raise AttributeError(f"module 'noeta.sdk' has no attribute {name!r}")


__all__ = [
    *_protocol_names,
    "ActivityOptions", "AssistantMessage", "AsyncClient", "AttemptsExhaustedError", "BudgetExceededError", "CallCounts", "Client",
    "ConfigurationError", "ModelPrice", "PriceTable", "QuotaExceededError", "UsageLimits",
    "ContentKindSpec", "ContentStore", "ContextLengthError", "DecoratedTool", "HostConfig",
    "InjectedMessage", "LocalContentStore", "MemoryStore", "NoetaError", "Options",
    "PayloadTooLargeError", "ProviderError", "QueryResult", "Registry", "Result", "SdkMcpServer",
    "TaskCancelledError", "TaskFailedError", "TaskNotFoundError", "TaskNotOpenError", "TaskResult",
    "ToolIdentityMismatchError", "ToolNotRegisteredError", "ToolResultView", "ToolRetryableError",
    "ToolUse", "UserMessage", "Validator", "ViewItem", "aquery", "expect_validator", "as_messages", "create_sdk_mcp_server",
    "envelope_to_dict", "image", "project", "query", "tool",
    "ObservedCall", "ResourceCall", "ResourceError", "ResourceNotFoundError", "ResourceSpec", "ScopeError", "SubAgent",
    "equip_resource", "equip_scope", "expect_resource", "expect_scope", "instrument", "run_with",
]
