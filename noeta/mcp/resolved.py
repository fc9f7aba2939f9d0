"""The worker's check of an outbound URL: the allow-list applied to the host as written and to
every address it resolves to, so a name that points into a private range is refused like the
address itself.

A resolver can answer differently a moment later (DNS rebinding): the check runs again before
every request, which narrows that window but cannot close it; an operator who must close it lists
MCP servers by address, or keeps workers in a network that cannot reach what they must not.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from noeta.mcp.outbound import UrlPolicy


async def addresses_of(host: str) -> list[str]:
    """The addresses ``host`` resolves to (itself when it is an address; none when it does not
    resolve: the connection then fails on its own)."""
    try:
        ipaddress.ip_address(host)
        return [host]
    except ValueError:
        pass
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return sorted({str(info[4][0]).partition("%")[0] for info in found})


async def allowed(policy: UrlPolicy, where: str, url: str) -> None:
    """Raise McpUrlNotAllowedError unless ``policy`` allows ``url`` and every address of its host."""
    policy.check(where, url)
    host = (urlsplit(url).hostname or "").lower()
    policy.check(where, url, await addresses_of(host))


__all__ = ["addresses_of", "allowed"]
