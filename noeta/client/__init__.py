"""The client side: Client / AsyncClient, Options, the history projection and message views."""

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
from noeta.client.options import HostConfig, Options
from noeta.client.projection import project
from noeta.client.wire import envelope_to_dict

__all__ = [
    "AssistantMessage", "AsyncClient", "Client", "HostConfig", "InjectedMessage", "Options",
    "Result", "ToolResultView", "ToolUse", "UserMessage", "ViewItem", "as_messages",
    "envelope_to_dict", "project",
]
