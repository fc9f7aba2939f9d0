"""The worker's live connections to remote MCP servers (the official ``mcp`` SDK).

Connections per distinct server configuration (after ``${MCP_*}`` references are resolved),
opened on first use and reused by every call of every task on this worker; each serves one
request at a time (so a server's question belongs to the call in flight: noeta.mcp.asking), and
calls at the same moment open more. A connection whose
server went away is dropped: a call that could not even be sent is retried at once on a fresh
connection (a crashed stdio server is started again); a call that was in flight when the connection
broke raises :class:`McpServerError`, which Temporal retries like any failed tool attempt.

The SDK's transports are async context managers whose cancel scopes must be left by the task that
entered them, so each connection lives in a task of its own until it is closed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import anyio
import httpx
from mcp import ClientSession, McpError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import (
    CallToolResult, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ErrorData,
    Implementation, Tool,
)

import noeta
from noeta.errors import McpServerError, McpServerNotAllowedError, NoetaError
from noeta.mcp.asking import STOPS, Asker, Hold, no_caller
from noeta.mcp.config import resolve
from noeta.mcp.failures import explain
from noeta.mcp.oauth import build_auth
from noeta.mcp.outbound import UrlPolicy
from noeta.mcp.resolved import allowed
from noeta.mcp.tokens import McpTokenStore
from noeta.protocols.elicitation import ElicitationAnswer
from noeta.protocols.mcp import McpServerConfig
from noeta.protocols.sampling import SampledAnswer
from noeta.security.scrub import register_secret

logger = logging.getLogger(__name__)

#: How long starting or connecting to a server and its MCP handshake may take.
CONNECT_TIMEOUT_SECONDS = 30.0
#: How long a closing connection may take to end its session (a server that is gone can make the
#: HTTP transport retry) before it is cancelled.
CLOSE_TIMEOUT_SECONDS = 2.0
#: Errors that say the connection is gone before a request could be sent.
_NOT_SENT = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
#: How this client introduces itself to servers (``initialize``'s ``clientInfo``).
CLIENT_INFO = Implementation(name="noeta", version=noeta.__version__)


class _Connection:
    """One open session, owned by a task that holds the transport open until :meth:`close`."""

    def __init__(
        self, alias: str, config: McpServerConfig, tokens: McpTokenStore | None = None, urls: UrlPolicy | None = None
    ) -> None:
        self.alias = alias
        self.config = config
        self.tokens = tokens
        self.urls = urls or UrlPolicy(None)
        self.failure: NoetaError | None = None
        """Why the connection broke, in a user's words (None while it works or after a close)."""
        self.session: ClientSession | None = None
        self.server_info: Implementation | None = None
        self.broken = False
        self.busy = False
        self.asker: Asker | None = None
        """The call in flight on this session (one at a time), whom the server's questions are for."""
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self.ended = asyncio.Event()
        """Set when the transport is gone: calls still waiting for an answer will not get one."""
        self._task: asyncio.Task[None] | None = None

    async def open(self, timeout: float) -> None:
        self._task = asyncio.create_task(self._hold(), name=f"mcp:{self.alias}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise McpServerError(
                f"MCP server {self.alias!r} did not answer its handshake within {timeout:g} s"
            ) from None

    async def _hold(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                if self.config.type == "stdio":
                    params = StdioServerParameters(
                        command=self.config.command or "",
                        args=list(self.config.args),
                        env=dict(self.config.env) or None,
                        cwd=self.config.cwd,
                    )
                    read, write = await stack.enter_async_context(stdio_client(params))
                else:
                    auth = None
                    if self.config.auth is not None:
                        auth = build_auth(self.alias, self.config, self.tokens or McpTokenStore.from_env())
                    http = await stack.enter_async_context(
                        create_mcp_http_client(headers=dict(self.config.headers), auth=auth)
                    )
                    # Every request (the server's, its authorization server's, a redirect's) is
                    # checked against the allow-list where it is about to leave.
                    http.event_hooks["request"].insert(0, self._check_request)
                    read, write, _ = await stack.enter_async_context(
                        streamable_http_client(self.config.url or "", http_client=http)
                    )
                session = await stack.enter_async_context(
                    ClientSession(
                        read, write, client_info=CLIENT_INFO, elicitation_callback=self._elicit,
                        sampling_callback=self._sample,
                    )
                )
                initialized = await session.initialize()
                self.session, self.server_info = session, initialized.serverInfo
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as err:  # noqa: BLE001 (reported to whoever waits for the handshake)
            self.broken = True
            if not isinstance(err, asyncio.CancelledError):
                self.failure = explain(self.alias, self.config, err, "" if self._ready.done() else "while connecting")
            if not self._ready.done():
                self._ready.set_exception(
                    self.failure or McpServerError(f"MCP server {self.alias!r}: the connection was cancelled")
                )
            elif not self._closing.is_set() and self.failure is not None:
                logger.warning("connection lost: %s", self.failure)
            if isinstance(err, asyncio.CancelledError):
                raise
        finally:
            self.broken = True
            self.ended.set()

    async def _elicit(self, context: Any, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        return await (self.asker.elicit(params) if self.asker is not None else no_caller(params))

    async def _sample(self, context: Any, params: CreateMessageRequestParams) -> CreateMessageResult | ErrorData:
        return await (self.asker.sample(params) if self.asker is not None else no_caller(params))

    async def _check_request(self, request: httpx.Request) -> None:
        await allowed(self.urls, f"mcp_servers[{self.alias!r}]", str(request.url))

    async def close(self) -> None:
        self.broken = True
        self._closing.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(task, CLOSE_TIMEOUT_SECONDS)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                task.cancel()
            except Exception:  # noqa: BLE001 (already logged by _hold)
                pass


class McpConnections:
    """Live MCP sessions of one worker, by server configuration.

    ``allowed_commands``: the stdio commands this worker may start (None: any). ``urls``: the
    servers' URLs it may connect to (default: ``NOETA_MCP_URLS``). ``environ``: where
    ``${MCP_*}`` references are resolved (default: the process environment). ``tokens``: where
    servers' OAuth tokens are kept (default: :meth:`McpTokenStore.from_env`, read when first needed).
    """

    def __init__(
        self,
        allowed_commands: Collection[str] | None = None,
        environ: Mapping[str, str] | None = None,
        tokens: McpTokenStore | None = None,
        urls: UrlPolicy | None = None,
    ) -> None:
        """See the class docstring for the arguments; no connection is opened before it is needed.
        """
        self.allowed_commands = None if allowed_commands is None else frozenset(allowed_commands)
        self._environ = environ
        self.tokens = tokens
        self.urls = urls or UrlPolicy.from_env()
        self._open: dict[str, list[_Connection]] = {}
        """Open sessions by configuration; each serves one request at a time (a server's question
        then belongs to that request), idle ones are reused."""
        self._locks: dict[str, asyncio.Lock] = {}
        self.connects = 0
        """Connections opened (a restarted stdio server counts again)."""
        self.listings = 0
        """``tools/list`` requests sent for tasks (the SDK may send its own to check results)."""

    def _key(self, config: McpServerConfig) -> str:
        return hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode()).hexdigest()

    async def _connection(self, alias: str, raw: McpServerConfig) -> _Connection:
        config, secrets = resolve(alias, raw, os.environ if self._environ is None else self._environ)
        for secret in secrets:
            register_secret(secret)
        if config.type == "stdio" and self.allowed_commands is not None and config.command not in self.allowed_commands:
            raise McpServerNotAllowedError(
                f"mcp_servers[{alias!r}]: this worker does not start {config.command!r}; list the commands it "
                "may start in NOETA_MCP_COMMANDS (comma-separated, '*' for any)"
            )
        if config.type == "http":
            await allowed(self.urls, f"mcp_servers[{alias!r}]", config.url or "")
        key = self._key(config)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            pool = self._open.setdefault(key, [])
            for current in list(pool):
                if current.broken:
                    pool.remove(current)
                    await current.close()
                elif not current.busy:
                    return current
            if config.auth is not None and self.tokens is None:
                self.tokens = McpTokenStore.from_env(dict(os.environ if self._environ is None else self._environ))
            connection = _Connection(alias, config, self.tokens, self.urls)
            await connection.open(CONNECT_TIMEOUT_SECONDS)
            self.connects += 1
            pool.append(connection)
            return connection

    async def _drop(self, connection: _Connection) -> None:
        connection.broken = True
        for pool in self._open.values():
            if connection in pool:
                pool.remove(connection)
        await connection.close()

    async def _request(self, alias: str, config: McpServerConfig, send: Any, asker: Asker | None = None) -> Any:
        """``send(session)``, on a fresh connection again if the first could not even send it;
        the server's questions meanwhile go to ``asker`` (none: they are refused)."""
        for fresh_try in (False, True):
            connection = await self._connection(alias, config)
            assert connection.session is not None
            connection.busy, connection.asker = True, asker
            try:
                return await self._unless_broken(connection, send(connection.session), asker)
            except STOPS:
                await self._drop(connection)  # the server's request stays unanswered: end it
                raise
            except _NOT_SENT as err:
                await self._drop(connection)
                if fresh_try or connection.failure is not None:
                    raise self._failure(alias, connection, err) from None
            except McpError as err:
                # CONNECTION_CLOSED, a session the server no longer knows (restarted), a timeout.
                await self._drop(connection)
                if connection.failure is not None:
                    raise connection.failure from None
                raise McpServerError(f"MCP server {alias!r}: {err.error.message}") from err
            except Exception as err:  # a transport failure (HTTP, pipes): reconnect on the next attempt
                await self._drop(connection)
                raise self._failure(alias, connection, err) from None
            finally:
                connection.busy, connection.asker = False, None
        raise AssertionError("unreachable")

    @staticmethod
    async def _unless_broken(connection: _Connection, request: Any, asker: Asker | None = None) -> Any:
        """``request``'s result, or the connection's failure if the transport dies first (a call in
        flight when a server refuses a token would otherwise wait for an answer that never comes),
        or the question the server asked that only a person can answer."""
        call = asyncio.ensure_future(request)
        ended = asyncio.ensure_future(connection.ended.wait())
        waits: set[asyncio.Future[Any]] = {call, ended} if asker is None else {call, ended, asker.needs}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            if not call.done():
                call.cancel()
        if asker is not None and asker.needs.done() and (asker.refused or not (call.done() and not call.cancelled())):
            raise asker.needs.result()
        if call.done() and not call.cancelled():
            return call.result()
        raise connection.failure or McpServerError(f"MCP server {connection.alias!r}: the connection was lost")

    @staticmethod
    def _failure(alias: str, connection: _Connection, err: BaseException) -> NoetaError:
        """Why a request failed: what broke the connection when that is known, else ``err`` explained."""
        return connection.failure or explain(alias, connection.config, err)

    async def server_version(self, alias: str, config: McpServerConfig) -> str:
        """The version the server reported when connecting (empty if none)."""
        connection = await self._connection(alias, config)
        return connection.server_info.version if connection.server_info else ""

    async def list_tools(self, alias: str, config: McpServerConfig) -> list[Tool]:
        """Every tool the server offers (all pages)."""

        async def send(session: ClientSession) -> list[Tool]:
            tools: list[Tool] = []
            cursor: str | None = None
            while True:
                page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
                tools.extend(page.tools)
                cursor = page.nextCursor
                if not cursor:
                    return tools

        self.listings += 1
        tools: list[Tool] = await self._request(alias, config, send)
        return tools

    async def call_tool(
        self, alias: str, config: McpServerConfig, tool: str, arguments: dict[str, Any], timeout_seconds: float | None,
        answers: Sequence[ElicitationAnswer] = (), sampled: Sequence[SampledAnswer] = (), hold: Hold | None = None,
    ) -> CallToolResult:
        """Call ``tool`` of the server with ``arguments``, waiting up to ``timeout_seconds`` (None:
        no limit); McpServerError when the server cannot be reached or the session fails; a stop
        (noeta.mcp.asking) when it asks what ``answers`` (a person's) or ``sampled`` (the task
        model's, each in order) lack and ``hold`` does not get in time, or samples without
        ``config.sampling``."""
        timeout = timedelta(seconds=timeout_seconds) if timeout_seconds else None

        async def send(session: ClientSession) -> CallToolResult:
            return await session.call_tool(tool, arguments, read_timeout_seconds=timeout)

        result: CallToolResult = await self._request(alias, config, send, Asker(alias, answers, sampled, sampling=config.sampling, hold=hold))
        return result

    async def aclose(self) -> None:
        """Close every connection (stdio servers are stopped)."""
        connections, self._open = [c for pool in self._open.values() for c in pool], {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
