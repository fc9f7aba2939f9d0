"""A user's one-time login to a remote MCP server (``authorization_code`` with PKCE), on the
operator's machine: the authorization page opens in a browser, the server sends the browser back to
a loopback address this process listens on, and the tokens go to the :class:`McpTokenStore` the
workers read. Workers refresh them from then on; they never open a browser themselves.
"""

from __future__ import annotations

import asyncio
import os
import webbrowser
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from urllib.parse import parse_qs, urlsplit

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from noeta.errors import McpServerError
from noeta.mcp.config import resolve
from noeta.mcp.connections import CLIENT_INFO
from noeta.mcp.failures import explain
from noeta.mcp.oauth import build_auth
from noeta.mcp.tokens import McpTokenStore
from noeta.protocols.mcp import McpServerConfig

_PAGE = b"<!doctype html><title>noeta</title><p>Logged in; you can close this window.</p>"


class _Callback:
    """A loopback HTTP listener that waits for the authorization server's redirect."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.result: asyncio.Future[tuple[str, str | None]] = asyncio.get_running_loop().create_future()
        self.server: asyncio.Server | None = None

    async def start(self, port: int) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        bound = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{bound}/callback"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await reader.readline()).decode("latin-1").split()
            while (await reader.readline()).strip():
                pass
            query = parse_qs(urlsplit(line[1]).query) if len(line) >= 2 else {}
            status = b"200 OK"
            if "error" in query and not self.result.done():
                self.result.set_exception(
                    McpServerError(f"the authorization server refused the login: {query['error'][0]}")
                )
            elif "code" in query and not self.result.done():
                states = query.get("state") or []
                self.result.set_result((query["code"][0], states[0] if states else None))
            else:
                status = b"404 Not Found"
            writer.write(b"HTTP/1.1 " + status + b"\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n" + _PAGE)
            await writer.drain()
        finally:
            writer.close()

    async def wait(self) -> tuple[str, str | None]:
        try:
            return await asyncio.wait_for(asyncio.shield(self.result), self.timeout)
        except asyncio.TimeoutError:
            raise McpServerError(f"no answer from the browser within {self.timeout:g} s; the login was abandoned") from None

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def open_in_browser(url: str) -> None:
    """Open the authorization page in the operator's browser (and print it, for a remote shell)."""
    print(f"Open this address to log in: {url}", flush=True)
    await asyncio.to_thread(webbrowser.open, url)


async def login(
    alias: str,
    server: McpServerConfig,
    store: McpTokenStore,
    open_browser: Callable[[str], Awaitable[None]] = open_in_browser,
    port: int = 0,
    timeout: float = 300.0,
) -> list[str]:
    """Log in to ``server`` (an http server whose auth grant is ``authorization_code``; its
    ``${MCP_*}`` references are resolved from this process's environment) and store the tokens; returns the names of the server's tools. ``port``: the loopback
    port the browser comes back to (0: any free one; a pre-registered client needs the one it was
    registered with). McpAuthError or McpServerError say what failed."""
    if server.type != "http" or server.auth is None or server.auth.grant != "authorization_code":
        raise McpServerError(f"mcp_servers[{alias!r}]: a login needs an http server with auth grant 'authorization_code'")
    server, _ = resolve(alias, server, os.environ)
    callback = _Callback(timeout)
    redirect_uri = await callback.start(port)
    try:
        auth = build_auth(alias, server, store, open_browser, callback.wait, redirect_uri)
        await auth.forget_tokens()  # a login always asks the user again
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(create_mcp_http_client(headers=dict(server.headers), auth=auth))
            read, write, _ = await stack.enter_async_context(streamable_http_client(server.url or "", http_client=http))
            session = await stack.enter_async_context(ClientSession(read, write, client_info=CLIENT_INFO))
            await asyncio.wait_for(session.initialize(), timeout)
            listed = await session.list_tools()
            return [tool.name for tool in listed.tools]
    except BaseException as err:
        if isinstance(err, (asyncio.CancelledError, KeyboardInterrupt)):
            raise
        raise explain(alias, server, err, "while logging in") from None
    finally:
        await callback.close()
