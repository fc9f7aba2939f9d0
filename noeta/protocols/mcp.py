"""Remote MCP servers as a task records them (seed: ``Options.mcp_servers``, ``mcp__{alias}__{tool}``).

Pure data. A server's configuration travels in the task input exactly as written: secrets appear
only as ``${NAME}`` references, which the worker resolves from its own environment when it starts
or connects to the server (see noeta.mcp.config).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Literal

McpTransport = Literal["stdio", "http"]

#: Prefix of a remote server's tools, as the model sees them: ``mcp__{alias}__{tool}``.
MCP_PREFIX = "mcp__"
#: The longest tool name every supported provider accepts (OpenAI: 64, Anthropic: 128).
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One remote MCP server: a command the worker starts (``stdio``) or a URL it connects to
    (``http``, the streamable HTTP transport)."""

    type: McpTransport
    command: str | None = None
    """stdio: the executable; the worker must allow it (``NOETA_MCP_COMMANDS`` for ``noeta worker``)."""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    """stdio: variables for the server process (values may hold ``${NAME}`` references)."""
    cwd: str | None = None
    url: str | None = None
    """http: the server's MCP endpoint, e.g. ``https://example.com/mcp``."""
    headers: dict[str, str] = field(default_factory=dict)
    """http: request headers (values may hold ``${NAME}`` references)."""


@dataclass(frozen=True, slots=True)
class McpTarget:
    """Where one MCP tool call goes: the server (as configured) and the tool's own name there."""

    alias: str
    tool: str
    server: McpServerConfig


def mcp_tool_name(alias: str, tool: str) -> str:
    """``mcp__{alias}__{tool}``, made safe for every provider's tool-name rules: characters other
    than letters, digits, ``_`` and ``-`` become ``_``; a name too long keeps a hash of the whole."""
    name = _UNSAFE.sub("_", f"{MCP_PREFIX}{alias}__{tool}")
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"
