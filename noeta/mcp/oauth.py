"""OAuth for remote MCP servers, built on the ``mcp`` SDK's client providers (``httpx.Auth``).

The SDK does the discovery the MCP authorization spec asks for (protected-resource metadata,
from ``WWW-Authenticate`` or the well-known URLs; authorization-server metadata with the older
spec's fallbacks), scope selection and step-up on ``403 insufficient_scope``, dynamic client
registration, and the token requests (``client_secret_basic``/``_post``, ``none``,
``private_key_jwt``). What Noeta adds:

- tokens live in a :class:`McpTokenStore` that every worker reads, with their expiry and the
  authorization server's metadata, so whichever worker finds a token expired refreshes it;
- a ``401`` first tries the refresh token (another worker may also have refreshed already: the
  store is read again) before anything else, so an access token that expired on the server's
  clock does not fail the call;
- on a worker, an ``authorization_code`` login that can no longer be refreshed is an
  :class:`McpAuthError` telling the operator to run ``noeta mcp login`` (a worker never opens a
  browser), and one that lacks a scope a call needs is :class:`McpLoginRequiredError` (the task
  waits for the operator's new login: noeta.protocols.login_wait); :mod:`noeta.mcp.login` is the
  interactive side. A machine identity (``client_credentials``) steps up by itself: the SDK asks
  for a token with the scope the server's ``403`` names and sends the request again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import httpx
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthMetadata, OAuthToken

import noeta
from noeta.errors import McpAuthError, McpLoginRequiredError
from noeta.mcp.failures import auth_advice
from noeta.mcp.tokens import McpTokenStore, login_key
from noeta.protocols.login_wait import login_command
from noeta.protocols.mcp import McpOAuthConfig, McpServerConfig

#: Where a login's browser is sent back to when no callback address is given (RFC 8252 loopback).
DEFAULT_REDIRECT_URI = "http://127.0.0.1:33418/callback"


class StoredLogin:
    """The SDK's ``TokenStorage`` over one record of a :class:`McpTokenStore`."""

    def __init__(self, store: McpTokenStore, key: str) -> None:
        """``key``: the record's name (:func:`noeta.mcp.tokens.login_key`)."""
        self.store, self.key = store, key
        self.record: dict[str, Any] = {}
        self.metadata: Callable[[], OAuthMetadata | None] = lambda: None

    async def reload(self) -> dict[str, Any]:
        """Read the record again (another worker may have refreshed the tokens)."""
        loaded = await asyncio.to_thread(self.store.load, self.key)
        self.record = loaded or {}
        return self.record

    async def _save(self) -> None:
        metadata = self.metadata()
        if metadata is not None:
            self.record["metadata"] = metadata.model_dump(mode="json", exclude_none=True)
        await asyncio.to_thread(self.store.save, self.key, dict(self.record))

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, if any."""
        tokens = self.record.get("tokens")
        return OAuthToken.model_validate(tokens) if tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Store new tokens and when the access token expires."""
        self.record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        self.record["expires_at"] = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        await self._save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The client registered for this login, if any."""
        info = self.record.get("client_info")
        return OAuthClientInformationFull.model_validate(info) if info else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store the client the authorization server registered."""
        self.record["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
        await self._save()


class _FleetTokens(OAuthClientProvider):
    """Tokens shared through the store; a 401 tries the refresh token before a new authorization."""

    _login: StoredLogin
    _alias: str
    _server: McpServerConfig

    def _attach(self, login: StoredLogin, alias: str, server: McpServerConfig) -> None:
        self._login, self._alias, self._server = login, alias, server
        login.metadata = lambda: self.context.oauth_metadata

    async def forget_tokens(self) -> None:
        """Drop the stored tokens (the registered client stays): the next request authorizes anew."""
        record = await self._login.reload()
        if record.pop("tokens", None) is not None:
            record.pop("expires_at", None)
            await asyncio.to_thread(self._login.store.save, self._login.key, record)
        self.context.clear_tokens()

    async def _load(self) -> None:
        record = await self._login.reload()
        self.context.current_tokens = await self._login.get_tokens()
        self.context.token_expiry_time = record.get("expires_at")
        if record.get("metadata") and self.context.oauth_metadata is None:
            self.context.oauth_metadata = OAuthMetadata.model_validate(record["metadata"])

    async def _initialize(self) -> None:
        await self._login.reload()
        await super()._initialize()
        await self._load()
        self._initialized = True

    async def _handle_refresh_response(self, response: httpx.Response) -> bool:
        tried = self.context.current_tokens
        if await super()._handle_refresh_response(response):
            return True
        # Another worker may have refreshed first, spending the refresh token this one held.
        await self._load()
        if self.context.current_tokens is not None and self.context.current_tokens != tried and self.context.is_token_valid():
            return True
        self.context.clear_tokens()
        return False

    def _refused(self, status: int) -> McpAuthError:
        where = f"MCP server {self._alias!r} ({self._server.url})"
        return McpAuthError(
            f"{where} refused the stored token (HTTP {status}) and it could not be refreshed; "
            f"{auth_advice(self._alias, self._server)}",
            alias=self._alias,
            url=self._server.url or "",
            status=status,
        )

    def _needs_scope(self, scope: str) -> McpLoginRequiredError:
        granted = self.context.current_tokens.scope if self.context.current_tokens else None
        wanted = " ".join(dict.fromkeys(f"{granted or ''} {scope}".split()))
        url = self._server.url or ""
        command = login_command(self._alias, url, wanted)
        return McpLoginRequiredError(
            f"MCP server {self._alias!r} ({url}) needs scope {scope!r}, which this login was not "
            f"granted (HTTP 403 insufficient_scope); log in again asking for it: `{command}`",
            alias=self._alias,
            url=url,
            status=403,
            request={"server": self._alias, "url": url, "scope": wanted, "command": command},
        )

    def _needs_login(self) -> bool:
        """A user's login that only ``noeta mcp login`` can renew (this process opens no browser)."""
        return isinstance(self, LoginTokens) and self.context.redirect_handler is None

    async def _auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if self._initialized and not self.context.is_token_valid():
            await self._load()
        refresh_tried = False
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request and response.status_code == 401 and not refresh_tried:
                    refresh_tried = True
                    if self.context.can_refresh_token():
                        await flow.aclose()
                        refreshed = yield await self._refresh_token()
                        if await self._handle_refresh_response(refreshed):
                            self._add_auth_header(request)
                            response = yield request
                            if response.status_code != 401:
                                return
                            self.context.clear_tokens()
                        if self._needs_login():
                            raise self._refused(401)
                        flow = super()._auth_flow(request)
                        outgoing = await flow.__anext__()
                        continue
                    if self._needs_login():
                        raise self._refused(401)
                if outgoing is request and response.status_code == 403 and self._needs_login():
                    if extract_field_from_www_auth(response, "error") == "insufficient_scope":
                        raise self._needs_scope(extract_field_from_www_auth(response, "scope") or "")
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()


class ClientCredentialsTokens(_FleetTokens, ClientCredentialsOAuthProvider):
    """A machine identity: ``client_credentials`` with a client secret (basic or post)."""


class PrivateKeyJwtTokens(_FleetTokens, PrivateKeyJWTOAuthProvider):
    """A machine identity: ``client_credentials``, authenticated by a signed JWT (``private_key_jwt``)."""


class LoginTokens(_FleetTokens):
    """Tokens a user granted (``authorization_code`` with PKCE): obtained by ``noeta mcp login``,
    refreshed by workers; a fixed client when one is configured, else the one registered at login."""

    def __init__(self, *args: Any, fixed_client: OAuthClientInformationFull | None = None, **kwargs: Any) -> None:
        """The SDK provider's arguments, and the pre-registered client if there is one."""
        super().__init__(*args, **kwargs)
        self._fixed_client = fixed_client
        self._scope = self.context.client_metadata.scope

    async def _initialize(self) -> None:
        await super()._initialize()
        if self._fixed_client is not None:
            self.context.client_info = self._fixed_client

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        # The scopes the server asks for (WWW-Authenticate, its metadata), and those the operator asked for.
        asked = f"{self.context.client_metadata.scope or ''} {self._scope or ''}".split()
        self.context.client_metadata.scope = " ".join(dict.fromkeys(asked)) or None
        return await super()._perform_authorization_code_grant()


def _auth_method(auth: McpOAuthConfig) -> str:
    if auth.token_endpoint_auth_method:
        return auth.token_endpoint_auth_method
    if auth.private_key:
        return "private_key_jwt"
    return "client_secret_basic" if auth.client_secret else "none"


def build_auth(
    alias: str,
    server: McpServerConfig,
    store: McpTokenStore,
    redirect_handler: Callable[[str], Awaitable[None]] | None = None,
    callback_handler: Callable[[], Awaitable[tuple[str, str | None]]] | None = None,
    redirect_uri: str = DEFAULT_REDIRECT_URI,
) -> _FleetTokens:
    """The ``httpx.Auth`` of ``server`` (its references already resolved). The handlers are given
    only by an interactive login; a worker has none."""
    auth = server.auth
    url = server.url or ""
    if auth is None:
        raise ValueError(f"mcp_servers[{alias!r}] has no auth")
    method = _auth_method(auth)
    login = StoredLogin(store, login_key(url, auth.grant, auth.client_id))
    provider: _FleetTokens
    if auth.grant == "client_credentials":
        if method == "private_key_jwt":
            assertion = SignedJWTParameters(
                issuer=auth.client_id or "",
                subject=auth.client_id or "",
                signing_key=auth.private_key or "",
                signing_algorithm=auth.signing_algorithm,
            ).create_assertion_provider()
            provider = PrivateKeyJwtTokens(
                url, login, auth.client_id or "", assertion, scopes=auth.scope, issuer=auth.issuer
            )
        else:
            provider = ClientCredentialsTokens(
                url,
                login,
                auth.client_id or "",
                auth.client_secret or "",
                token_endpoint_auth_method="client_secret_post" if method == "client_secret_post" else "client_secret_basic",
                scopes=auth.scope,
                issuer=auth.issuer,
            )
    else:
        metadata = OAuthClientMetadata(
            client_name=f"noeta {noeta.__version__}",
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method=method,  # type: ignore[arg-type]
            scope=auth.scope,
        )
        # A client id that is an https URL names the operator's Client ID Metadata Document: used
        # where the authorization server supports those, else the client registers as usual.
        document = auth.client_id if auth.client_id and auth.client_id.startswith("https://") else None
        fixed = None
        if auth.client_id and document is None:
            fixed = OAuthClientInformationFull(
                client_id=auth.client_id,
                client_secret=auth.client_secret,
                redirect_uris=[redirect_uri],  # type: ignore[list-item]
                token_endpoint_auth_method=method,  # type: ignore[arg-type]
                grant_types=["authorization_code", "refresh_token"],
                scope=auth.scope,
            )
        provider = LoginTokens(
            url, metadata, login, redirect_handler, callback_handler, fixed_client=fixed, client_metadata_url=document
        )
    provider._attach(login, alias, server)
    return provider

