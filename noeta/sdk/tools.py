"""``@tool`` and in-process MCP servers of ``@tool`` functions.

The decorator itself lives in :mod:`noeta.protocols.tool_decorator` (the built-in tools use it
too); it is re-exported here and from :mod:`noeta.sdk`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from noeta.protocols.tool import ToolResult
from noeta.protocols.tool_decorator import DecoratedTool, ToolDecorator, ToolFunction, ToolReturn, tool
from noeta.protocols.tool_schema import ToolDescription, tool_description


@dataclass(frozen=True)
class SdkMcpServer:
    """An in-process ("sdk" transport) MCP server bundling ``@tool`` functions.

    Its tools keep their bare names; the ``mcp__{alias}__{tool}`` prefix is for remote servers.
    """

    name: str
    version: str
    tools: tuple[DecoratedTool, ...]


def create_sdk_mcp_server(name: str, version: str = "1.0.0", tools: Iterable[DecoratedTool] = ()) -> SdkMcpServer:
    """Bundle ``@tool`` functions as an in-process MCP server for ``Options.mcp_servers``.

    Raises ValueError for an empty ``name`` and TypeError for an item that is not a DecoratedTool."""
    if not isinstance(name, str) or not name:
        raise ValueError("create_sdk_mcp_server: name must be a non-empty string")
    items = tuple(tools)
    for item in items:
        if not isinstance(item, DecoratedTool):
            raise TypeError(f"create_sdk_mcp_server: {item!r} is not a @tool function (DecoratedTool)")
    return SdkMcpServer(name=name, version=version, tools=items)


__all__ = [
    "DecoratedTool", "SdkMcpServer", "ToolDecorator", "ToolDescription", "ToolFunction", "ToolResult", "ToolReturn",
    "create_sdk_mcp_server", "tool", "tool_description",
]
