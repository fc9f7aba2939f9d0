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
#: How a worker obtains an access token: as a machine (``client_credentials``) or with tokens a
#: user granted once through ``noeta mcp login`` (``authorization_code``, with PKCE).
McpGrant = Literal["client_credentials", "authorization_code"]
#: How the client authenticates at the token endpoint (RFC 8414 names).
McpTokenAuthMethod = Literal["client_secret_basic", "client_secret_post", "none", "private_key_jwt"]

#: Prefix of a remote server's tools, as the model sees them: ``mcp__{alias}__{tool}``.
MCP_PREFIX = "mcp__"
#: The longest tool name every supported provider accepts (OpenAI: 64, Anthropic: 128).
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class McpOAuthConfig:
    """OAuth 2.1 authorization of an http server, as the MCP authorization spec describes it: the
    worker discovers the server's authorization server and gets (and refreshes) its own tokens.

    Secrets (``client_secret``, ``private_key``) are ``${MCP_*}`` references, like headers."""

    grant: McpGrant = "client_credentials"
    client_id: str | None = None
    """A pre-registered client; None: registered dynamically where the server offers it
    (``authorization_code`` only). An ``https://`` URL (``authorization_code``) is the address of
    the operator's Client ID Metadata Document: the client id where the authorization server
    supports those (``client_id_metadata_document_supported``), else the client registers as usual."""
    client_secret: str | None = None
    private_key: str | None = None
    """``private_key_jwt``: the PEM key the client signs its assertions with."""
    token_endpoint_auth_method: McpTokenAuthMethod | None = None
    """None: ``private_key_jwt`` with a private key, ``client_secret_basic`` with a secret, else ``none``."""
    signing_algorithm: str = "RS256"
    """``private_key_jwt``: the JWS algorithm of the assertion (``RS256``, ``ES256``, …)."""
    scope: str | None = None
    """Scopes to ask for; None: those the server asks for (``WWW-Authenticate``, its metadata)."""
    issuer: str | None = None
    """The authorization server the client's credentials belong to; None: whichever the server names."""


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
    auth: McpOAuthConfig | None = None
    """http: OAuth authorization (None: only ``headers``)."""
    local: bool = False
    """Call this server's tools as local activities (noeta.protocols.local_tools): for a server
    whose every tool answers within seconds and cannot block."""
    sampling: bool = False
    """Answer the server's ``sampling/createMessage`` requests with the task's model (a recorded
    model call of the task, shown to its guards, within its budget: noeta.protocols.sampling);
    off: refused, and the tool call fails with McpSamplingNotAllowedError."""


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
