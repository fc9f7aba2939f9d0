"""A real OAuth 2.1 authorization server and an MCP server (the SDK's FastMCP) it protects, both on
127.0.0.1 over HTTP, for the MCP authorization tests.

The authorization server publishes RFC 8414 metadata and serves ``/register`` (dynamic client
registration), ``/authorize`` (approves at once and redirects back with a code; PKCE S256 is
checked), and ``/token`` (``client_credentials``, ``authorization_code``, ``refresh_token`` with
rotation; client authentication basic, post or none). The MCP server answers 401 with
``WWW-Authenticate`` pointing at its protected-resource metadata and accepts only tokens the
authorization server issued and has not expired or revoked. :class:`AuthState` lets a test expire
or revoke tokens and read what was issued.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import Context
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.support.mcp_server import build_server, free_port


@dataclass
class AuthState:
    """What the authorization server knows; shared with the MCP server (same process)."""

    clients: dict[str, dict[str, Any]] = field(default_factory=dict)
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    access: dict[str, dict[str, Any]] = field(default_factory=dict)
    refresh: dict[str, dict[str, Any]] = field(default_factory=dict)
    issued: list[str] = field(default_factory=list)
    """Every access and refresh token ever issued (for "never in history" checks)."""
    grants: list[str] = field(default_factory=list)
    """The grant type of every successful token request, in order."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_client(self, client_id: str, secret: str | None, method: str = "client_secret_basic") -> None:
        self.clients[client_id] = {"secret": secret, "method": method}

    def expire_access_tokens(self) -> None:
        """Every access token issued so far is now past its lifetime (refresh tokens still work)."""
        with self.lock:
            for token in self.access.values():
                token["expires_at"] = 0

    def revoke_all(self) -> None:
        """Revoke every access and refresh token (a user withdrew the grant)."""
        with self.lock:
            self.access.clear()
            self.refresh.clear()

    def _issue(self, client_id: str, scopes: list[str], with_refresh: bool) -> dict[str, Any]:
        access = "at-" + secrets.token_urlsafe(24)
        body: dict[str, Any] = {"access_token": access, "token_type": "Bearer", "expires_in": 3600}
        with self.lock:
            self.access[access] = {"client_id": client_id, "scopes": scopes, "expires_at": time.time() + 3600}
            self.issued.append(access)
            if with_refresh:
                refresh = "rt-" + secrets.token_urlsafe(24)
                self.refresh[refresh] = {"client_id": client_id, "scopes": scopes}
                self.issued.append(refresh)
                body["refresh_token"] = refresh
        if scopes:
            body["scope"] = " ".join(scopes)
        return body

    async def verify_token(self, token: str) -> AccessToken | None:
        """The MCP server's check: issued here, not expired, not revoked."""
        with self.lock:
            found = self.access.get(token)
        if found is None or found["expires_at"] <= time.time():
            return None
        return AccessToken(token=token, client_id=found["client_id"], scopes=found["scopes"], expires_at=int(found["expires_at"]))


def _error(error: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error}, status_code=status)


def authorization_app(state: AuthState, issuer: str) -> Starlette:
    """The authorization server's routes."""

    async def metadata(request: Request) -> Response:
        return JSONResponse({
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": ["tools"],
        })

    async def register(request: Request) -> Response:
        body = await request.json()
        client_id = "dyn-" + secrets.token_hex(6)
        method = body.get("token_endpoint_auth_method") or "client_secret_basic"
        secret = None if method == "none" else secrets.token_urlsafe(16)
        state.add_client(client_id, secret, method)
        reply = {**body, "client_id": client_id, "token_endpoint_auth_method": method}
        if secret:
            reply["client_secret"] = secret
        return JSONResponse(reply, status_code=201)

    async def authorize(request: Request) -> Response:
        q = request.query_params
        if q.get("client_id") not in state.clients or q.get("code_challenge_method") != "S256":
            return _error("invalid_request")
        code = secrets.token_urlsafe(16)
        state.codes[code] = {
            "client_id": q["client_id"], "challenge": q["code_challenge"], "redirect_uri": q["redirect_uri"],
            "scopes": (q.get("scope") or "").split(),
        }
        return RedirectResponse(f"{q['redirect_uri']}?{urlencode({'code': code, 'state': q.get('state', '')})}", 302)

    def authenticate(request: Request, form: Any) -> str | None:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret")
        client = state.clients.get(client_id)
        if client is None or (client["secret"] is not None and client["secret"] != secret):
            return None
        return client_id

    async def token(request: Request) -> Response:
        form = await request.form()
        client_id = authenticate(request, form)
        if client_id is None:
            return _error("invalid_client", 401)
        grant = form.get("grant_type")
        if grant == "client_credentials":
            body = state._issue(client_id, str(form.get("scope") or "").split(), with_refresh=False)
        elif grant == "authorization_code":
            code = state.codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier") or "")
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if code is None or code["client_id"] != client_id or code["challenge"] != challenge:
                return _error("invalid_grant")
            body = state._issue(client_id, code["scopes"], with_refresh=True)
        elif grant == "refresh_token":
            with state.lock:
                old = state.refresh.pop(str(form.get("refresh_token")), None)
            if old is None or old["client_id"] != client_id:
                return _error("invalid_grant")
            body = state._issue(client_id, old["scopes"], with_refresh=True)
        else:
            return _error("unsupported_grant_type")
        state.grants.append(str(grant))
        return JSONResponse(body, headers={"cache-control": "no-store"})

    return Starlette(routes=[
        Route("/.well-known/oauth-authorization-server", metadata),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
    ])


@contextmanager
def _serve(app: Any, port: int, lifespan: str) -> Iterator[None]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, name=f"oauth-test-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the test server did not start on port {port}")
        time.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@dataclass
class ProtectedServer:
    """A running authorization server and the MCP server it protects."""

    state: AuthState
    issuer: str
    url: str
    step_up: StepUp | None = None


class StepUp:
    """ASGI middleware: a ``tools/call`` of a tool in ``needs`` whose token lacks that tool's scope
    is refused with ``403 insufficient_scope`` and a ``WWW-Authenticate`` scope challenge naming the
    token's scopes and the missing one, as the MCP authorization spec's step-up describes."""

    def __init__(self, app: Any, state: AuthState, needs: dict[str, str], metadata_url: str) -> None:
        self.app, self.state, self.needs, self.metadata_url = app, state, needs, metadata_url
        self.refused: list[str] = []
        """The tools refused for want of scope, in order."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        try:
            rpc = json.loads(body or b"{}")
        except ValueError:
            rpc = {}
        name = (rpc.get("params") or {}).get("name") if isinstance(rpc, dict) and rpc.get("method") == "tools/call" else None
        needed = self.needs.get(name) if isinstance(name, str) else None
        if needed is not None:
            header = dict(scope["headers"]).get(b"authorization", b"").decode()
            with self.state.lock:
                token = self.state.access.get(header.removeprefix("Bearer "))
            granted = list(token["scopes"]) if token else []
            if token is not None and needed not in granted:
                self.refused.append(name)
                challenge = (
                    f'Bearer error="insufficient_scope", scope="{" ".join([*granted, needed])}", '
                    f'resource_metadata="{self.metadata_url}"'
                )
                response = JSONResponse({"error": "insufficient_scope"}, 403, {"www-authenticate": challenge})
                return await response(scope, replay, send)
        return await self.app(scope, replay, send)


@contextmanager
def running_protected_server(scopes: list[str] | None = None, step_up: dict[str, str] | None = None) -> Iterator[ProtectedServer]:
    """The authorization server and the MCP server (``.../mcp``, the test tools plus ``whoami``).
    ``step_up``: tools that need one more scope (tool name -> scope), and a tool ``publish``
    that needs ``write`` there (served by :class:`StepUp`)."""
    state = AuthState()
    as_port, mcp_port = free_port(), free_port()
    issuer = f"http://127.0.0.1:{as_port}"
    url = f"http://127.0.0.1:{mcp_port}/mcp"
    mcp = build_server(
        port=mcp_port,
        token_verifier=state,
        auth=AuthSettings(
            issuer_url=issuer, resource_server_url=url, required_scopes=scopes or [], validate_token_resource=False
        ),
    )

    @mcp.tool()
    def whoami(ctx: Context) -> str:
        """The name and version the client introduced itself with."""
        params = ctx.session.client_params
        info = params.clientInfo if params is not None else None
        return f"{info.name} {info.version}" if info is not None else "unknown"

    if step_up is not None:

        @mcp.tool()
        def publish(text: str) -> str:
            """Publish ``text`` (needs the ``write`` scope when served behind StepUp)."""
            return f"published: {text}"

    app: Any = mcp.streamable_http_app()
    guard: StepUp | None = None
    if step_up is not None:
        metadata_url = f"http://127.0.0.1:{mcp_port}/.well-known/oauth-protected-resource/mcp"
        app = guard = StepUp(app, state, step_up, metadata_url)
    with _serve(authorization_app(state, issuer), as_port, "off"), _serve(app, mcp_port, "on"):
        yield ProtectedServer(state=state, issuer=issuer, url=url, step_up=guard)
