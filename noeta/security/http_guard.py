"""The gate in front of Noeta's HTTP servers (``noeta serve``, ``noeta codec-server``): an ASGI
middleware that checks, in order,

1. ``Host`` against an allow-list (defeats DNS rebinding) → 403 ``ForbiddenHost``;
2. ``Origin``, when a browser sends one, against the CORS allow-list (or the request's own
   origin) → 403 ``ForbiddenOrigin``; an allowed preflight (``OPTIONS``) is answered here;
3. the credential: ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``, compared in constant
   time with every configured key → 401 ``Unauthorized``;
4. a declared ``Content-Length`` over the limit → 413, and a body whose ``Content-Type`` is not
   JSON → 415 (a cross-site ``text/plain`` form post never reaches a handler).

Paths in ``open_paths`` (``/healthz``, ``/readyz``) skip all checks: they reveal nothing and
load balancers probe them by IP address.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from noeta.errors import ConfigurationError

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
DEFAULT_MAX_BODY = 4 * 1024 * 1024
_ALLOWED_HEADERS = "authorization, content-type, x-api-key, x-namespace, last-event-id"


def read_keys(inline: str | None, path: str | None, what: str) -> tuple[str, ...]:
    """Keys from a comma-separated value and/or a file (one per line, ``#`` comments)."""
    keys: list[str] = [k.strip() for k in (inline or "").split(",") if k.strip()]
    if path:
        try:
            text = Path(path).expanduser().read_text()
        except OSError as err:
            raise ConfigurationError(f"cannot read the {what} file ({err.strerror})") from None
        keys += [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    short = [k for k in keys if len(k) < 16]
    if short:
        raise ConfigurationError(f"{what} must be at least 16 characters (use e.g. `openssl rand -hex 32`)")
    return tuple(keys)


def host_of(value: str) -> str:
    """``Host`` header value without its port, lower-case (``[::1]:80`` -> ``::1``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@dataclass(frozen=True)
class GuardConfig:
    """What the request guard enforces: API keys, allowed hosts, CORS origins, the body limit, and
    the paths left open."""
    api_keys: tuple[str, ...] = ()
    """Accepted credentials; empty = no authentication (only sensible on a loopback bind)."""
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    """Host names (no port) requests may address; ``*`` allows any (behind a proxy that checks)."""
    cors_origins: tuple[str, ...] = ()
    """Origins (``https://ui.example.com``) whose browser pages may call the API."""
    max_body_bytes: int = DEFAULT_MAX_BODY
    open_paths: frozenset[str] = field(default_factory=lambda: frozenset({"/healthz", "/readyz"}))

    def __repr__(self) -> str:  # never print keys
        """The configuration without its keys (only how many there are)."""
        return (
            f"GuardConfig(api_keys=<{len(self.api_keys)}>, allowed_hosts={self.allowed_hosts!r}, "
            f"cors_origins={self.cors_origins!r}, max_body_bytes={self.max_body_bytes})"
        )

    @classmethod
    def from_env(
        cls, prefix: str = "NOETA", bind_host: str | None = None, env: Mapping[str, str] | None = None, **overrides: Any
    ) -> GuardConfig:
        """``{prefix}_API_KEYS`` / ``{prefix}_API_KEYS_FILE``, ``{prefix}_ALLOWED_HOSTS``,
        ``{prefix}_CORS_ORIGINS`` (comma-separated). The bind host is always allowed."""
        env = os.environ if env is None else env
        keys = read_keys(env.get(f"{prefix}_API_KEYS"), env.get(f"{prefix}_API_KEYS_FILE"), f"{prefix}_API_KEYS")
        hosts = _csv(env.get(f"{prefix}_ALLOWED_HOSTS")) or LOOPBACK_HOSTS
        if bind_host and bind_host not in ("0.0.0.0", "::") and host_of(bind_host) not in hosts:
            hosts = (*hosts, host_of(bind_host))
        origins = tuple(o.rstrip("/") for o in _csv(env.get(f"{prefix}_CORS_ORIGINS")))
        return cls(api_keys=keys, allowed_hosts=tuple(h.lower() for h in hosts), cors_origins=origins, **overrides)

    def check_bind(self, host: str, allow_unauthenticated: bool = False) -> None:
        """Refuse to listen beyond loopback without keys (unless explicitly allowed)."""
        if not self.api_keys and host_of(host) not in LOOPBACK_HOSTS and not allow_unauthenticated:
            raise ConfigurationError(
                f"refusing to listen on {host} without authentication: set NOETA_API_KEYS (or _FILE), "
                "or bind 127.0.0.1 behind an authenticating proxy"
            )


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


#: Where the guard leaves the id of the request's API key for the app (``request.state``).
KEY_ID_STATE = "noeta_api_key_id"
#: The key id of requests to a server without API keys.
ANONYMOUS_KEY_ID = "anonymous"


def key_id(key: str) -> str:
    """A key's public name: a hash prefix, safe to log, index and put in a quota table."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def key_matches(presented: str, keys: Iterable[str]) -> bool:
    """Constant-time comparison against every key (no early exit that would leak which matched)."""
    found = False
    for key in keys:
        found |= hmac.compare_digest(presented.encode(), key.encode())
    return found


class RequestGuard:
    """ASGI middleware enforcing a :class:`GuardConfig` (see the module docstring)."""

    def __init__(self, app: ASGIApp, config: GuardConfig) -> None:
        """``app``: the application behind the guard; ``config``: what it enforces."""
        self.app, self.config = app, config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check an HTTP request as the module describes and pass it to the app, or answer it with
        the error; other scopes and open paths go straight through."""
        if scope["type"] != "http" or scope["path"] in self.config.open_paths:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if "*" not in self.config.allowed_hosts and host_of(host) not in self.config.allowed_hosts:
            await _reply(send, 403, "ForbiddenHost", "this server does not answer for that Host")
            return
        origin = headers.get("origin")
        cors: list[tuple[bytes, bytes]] = []
        if origin is not None:
            origin = origin.rstrip("/")
            if origin in self.config.cors_origins:
                cors = [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin")]
            elif not _same_origin(origin, host, scope):
                await _reply(send, 403, "ForbiddenOrigin", "cross-origin requests from this origin are not allowed")
                return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await _preflight(send, cors)
            return
        if self.config.api_keys and not key_matches(_credential(headers), self.config.api_keys):
            await _reply(send, 401, "Unauthorized", "a valid API key is required", [(b"www-authenticate", b"Bearer"), *cors])
            return
        # Which key this request spends for (its daily quota, docs/budgets.md).
        scope.setdefault("state", {})[KEY_ID_STATE] = (
            key_id(_credential(headers)) if self.config.api_keys else ANONYMOUS_KEY_ID
        )
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.config.max_body_bytes:
            await _reply(send, 413, "PayloadTooLargeError", f"request body is over {self.config.max_body_bytes} bytes", cors)
            return
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type and content_type != "application/json" and (length not in ("", "0") or "transfer-encoding" in headers):
            await _reply(send, 415, "UnsupportedMediaType", "request bodies must be application/json", cors)
            return
        if not cors:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *cors]
            await send(message)

        await self.app(scope, receive, send_with_cors)


def _credential(headers: Mapping[str, str]) -> str:
    auth = headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key", "").strip()


def _same_origin(origin: str, host: str, scope: Scope) -> bool:
    scheme = scope.get("scheme", "http")
    return origin.lower() == f"{scheme}://{host}".lower()


async def _preflight(send: Send, cors: list[tuple[bytes, bytes]]) -> None:
    headers = [
        *cors,
        (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
        (b"access-control-allow-headers", _ALLOWED_HEADERS.encode()),
        (b"access-control-max-age", b"600"),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _reply(send: Send, status: int, error: str, message: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": error, "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
