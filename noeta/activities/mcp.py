"""Remote MCP servers on the activity side: their tools as :class:`ToolSpec`s (listed once, when a
task is prepared, and recorded in history) and their call results as :class:`ToolResult`s.

Imports the ``mcp`` SDK only through :mod:`noeta.mcp.connections`, loaded when a task first uses a
remote server, so workers without the ``noeta[mcp]`` extra run every other task.

:class:`McpServers` is the worker's side of them: the connections (opened on first use, closed when
the worker stops), handed to the activities that list tools (``prepare_task``) and call them
(``invoke_tool``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from noeta.activities.registry import Registry
from noeta.context.content_store import ContentStore
from noeta.errors import ConfigurationError
from noeta.protocols.elicitation import ElicitationAnswer
from noeta.protocols.mcp import McpServerConfig, McpTarget, mcp_tool_name
from noeta.protocols.messages import ImageBlock
from noeta.protocols.sampling import SampledAnswer
from noeta.protocols.tool import RiskLevel, ToolResult, ToolSpec, tool_fingerprint

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool, ToolAnnotations

    from noeta.mcp.asking import Hold
    from noeta.mcp.connections import McpConnections


def load_connections(allowed_commands: Any = None) -> McpConnections:
    """New MCP connections (stdio servers limited to ``allowed_commands``; None: any);
    ConfigurationError when the worker lacks the [mcp] extra."""
    try:
        from noeta.mcp.connections import McpConnections
    except ImportError as err:
        raise ConfigurationError(
            "this task uses remote MCP servers; install them on the worker: pip install 'noeta[mcp]'"
        ) from err
    return McpConnections(allowed_commands)


def risk_of(annotations: ToolAnnotations | None) -> RiskLevel:
    """The server's hints as a risk level for guards: read-only is low, destructive is high."""
    if annotations is None:
        return "medium"
    if annotations.readOnlyHint:
        return "low"
    if annotations.destructiveHint:
        return "high"
    return "medium"


def spec_of(alias: str, tool: Tool, version: str) -> ToolSpec:
    """The ToolSpec of a remote server's tool: named after the server's ``alias``, versioned by the
    server's ``version``, with the risk level its annotations suggest."""
    name = mcp_tool_name(alias, tool.name)
    schema = dict(tool.inputSchema or {"type": "object", "properties": {}})
    version = f"mcp:{version or '0'}"
    return ToolSpec(
        name=name,
        version=version,
        description=tool.description or tool.title or "",
        input_schema=schema,
        risk_level=risk_of(tool.annotations),
        fingerprint=tool_fingerprint(name, version, schema),
        mcp_server=alias,
        mcp_tool=tool.name,
    )


async def list_specs(connections: McpConnections, servers: dict[str, McpServerConfig]) -> list[ToolSpec]:
    """Every remote server's tools, servers in alias order, each server's tools in its own order."""

    async def one(alias: str) -> list[ToolSpec]:
        config = servers[alias]
        tools = await connections.list_tools(alias, config)
        version = await connections.server_version(alias, config)
        return [spec_of(alias, tool, version) for tool in tools]

    per_server = await asyncio.gather(*(one(alias) for alias in sorted(servers)))
    return [spec for specs in per_server for spec in specs]


def tool_result(result: CallToolResult, store: ContentStore) -> ToolResult:
    """A call's content as a ToolResult: text joined, images kept in the content store, structured
    content as JSON when there is no text; ``isError`` makes it a failed result for the model."""
    texts: list[str] = []
    images: list[ImageBlock] = []
    for item in result.content:
        kind = getattr(item, "type", "")
        if kind == "text":
            texts.append(item.text)  # type: ignore[union-attr]
        elif kind == "image":
            try:
                data = base64.b64decode(item.data, validate=True)  # type: ignore[union-attr]
            except (binascii.Error, ValueError):
                texts.append("[an image the server sent was not valid base64]")
                continue
            media_type = getattr(item, "mimeType", None) or "application/octet-stream"
            images.append(ImageBlock(source=store.put(data, media_type)))
        elif kind == "resource":
            resource = item.resource  # type: ignore[union-attr]
            text = getattr(resource, "text", None)
            texts.append(text if text is not None else f"[resource {resource.uri} ({resource.mimeType or 'binary'})]")
        elif kind == "resource_link":
            texts.append(f"[resource {item.uri}]")  # type: ignore[union-attr]
        else:
            texts.append(f"[{kind or 'unknown'} content]")
    if not texts and result.structuredContent is not None:
        texts.append(json.dumps(result.structuredContent, ensure_ascii=False, sort_keys=True))
    output = "\n".join(texts)
    return ToolResult(success=not result.isError, output=output, images=images)


def schemas_json(specs: list[ToolSpec]) -> bytes:
    """The provider-neutral tool shapes of ``specs``, stored once per task for its model calls."""
    return json.dumps(
        [{"name": s.name, "description": s.description, "input_schema": s.input_schema} for s in specs],
        sort_keys=True,
    ).encode()


class McpServers:
    """The worker's connections to remote MCP servers, opened on first use and kept in the
    registry (``Registry.mcp_connections``), so a registry given connections of its own uses them."""

    def __init__(self, registry: Registry) -> None:
        """``registry``: where the connections are kept, with the stdio commands tasks may start."""
        self._registry = registry

    def connections(self) -> McpConnections:
        """The live connections, created on first use (stdio servers limited to the registry's
        ``mcp_commands``)."""
        if self._registry.mcp_connections is None:
            self._registry.mcp_connections = load_connections(self._registry.mcp_commands)
        connections: McpConnections = self._registry.mcp_connections
        return connections

    async def list_specs(self, servers: dict[str, McpServerConfig]) -> list[ToolSpec]:
        """The tools of ``servers`` as ToolSpecs (see :func:`list_specs`)."""
        return await list_specs(self.connections(), servers)

    async def call_tool(
        self, target: McpTarget, arguments: dict[str, Any], timeout_seconds: float | None,
        answers: Sequence[ElicitationAnswer] = (), sampled: Sequence[SampledAnswer] = (), hold: Hold | None = None,
    ) -> CallToolResult:
        """Call ``target``'s tool; a lost connection raises (the attempt is retried on a fresh one),
        a request ``answers`` (a person's) or ``sampled`` (the task model's, each in order) lack
        stops the call (noeta.mcp.asking), unless ``hold`` gets a person's answer in time."""
        return await self.connections().call_tool(
            target.alias, target.server, target.tool, arguments, timeout_seconds, answers, sampled, hold
        )

    async def aclose(self) -> None:
        """Close the connections and stop the stdio servers behind them (a later task opens new ones)."""
        connections, self._registry.mcp_connections = self._registry.mcp_connections, None
        if connections is not None:
            await connections.aclose()
