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

Why not Starlette's own middleware for the Host, CORS and size checks: each answers differently from
what the guard promises and tests/test_http_security.py pins, and none knows the open paths.
``TrustedHostMiddleware`` refuses a Host with a plain-text 400 (the guard: 403 ``ForbiddenHost`` in
the JSON error body every other refusal has) and would refuse a load balancer's probe by IP address.
``CORSMiddleware`` lets a request from a foreign origin through without CORS headers, so a
cross-site ``text/plain`` form post would still reach a handler (the guard refuses it with 403
``ForbiddenOrigin``), and answers preflights with 200, or a plain-text 400 when refused (the guard:
204, or 403). ``RequestBodyLimitMiddleware`` answers a plain-text 413 (the guard: the JSON
``PayloadTooLargeError``; the API's own route class also counts the bytes as they arrive,
noeta.http.bodies).

What a server enforces comes from its settings: :class:`ServerSettings` for ``noeta serve``
(``NOETA_API_KEYS``, ``NOETA_API_KEYS_FILE``, ``NOETA_API_KEYS_DSN``, ``NOETA_ALLOWED_HOSTS``,
``NOETA_CORS_ORIGINS``, ``NOETA_ALLOW_UNAUTHENTICATED``; keys carry a name, a tenant and roles:
:mod:`noeta.security.api_keys`, :mod:`noeta.security.key_table`), :class:`CodecServerSettings` for ``noeta codec-server`` (the
same with ``NOETA_CODEC_`` and ``TOKENS`` for ``API_KEYS``).
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import SettingsConfigDict

from noeta.config.settings import EnvSettings, csv
from noeta.errors import ConfigurationError
from noeta.security.api_keys import (
    ANONYMOUS,
    MIN_SECRET_CHARS,
    ApiKey,
    KeyFile,
    Principal,
    matching_key,
    read_key_file,
)
from noeta.security.api_keys import key_id as key_id  # re-exported: callers import it from here
from noeta.security.key_table import DEFAULT_REFRESH_SECONDS, DEFAULT_TABLE, KeyTable

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
DEFAULT_MAX_BODY = 4 * 1024 * 1024
_ALLOWED_HEADERS = "authorization, content-type, x-api-key, x-namespace, last-event-id"


def read_keys(inline: str | None, path: str | Path | None, what: str) -> tuple[str, ...]:
    """Secrets from a comma-separated value and/or a keys file (:mod:`noeta.security.api_keys`:
    a secret per line, optionally with name, tenant and roles; ``#`` comments)."""
    keys: list[str] = list(csv(inline or ""))
    if path:
        keys += [key.secret for key in read_key_file(Path(path), f"the {what} file")]
    return _long_enough(tuple(keys), what)


def _long_enough(keys: tuple[str, ...], what: str) -> tuple[str, ...]:
    if any(len(k) < MIN_SECRET_CHARS for k in keys):
        raise ConfigurationError(f"{what} must be at least 16 characters (use e.g. `openssl rand -hex 32`)")
    return keys


def _secrets(cls: type[EnvSettings], raw: Any, info: ValidationInfo) -> Any:
    # The validator of a field of secrets (API keys, codec tokens): a comma-separated list.
    secrets = csv(raw)
    return _long_enough(secrets, cls.variable(info.field_name or "")) if isinstance(secrets, tuple) else secrets


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
    api_keys: tuple[str | ApiKey, ...] = ()
    """Accepted credentials: a bare secret has every role and the tenant ``default``; none here
    and no ``keys_file`` = no authentication (only sensible on a loopback bind)."""
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    """Host names (no port) requests may address; ``*`` allows any (behind a proxy that checks)."""
    cors_origins: tuple[str, ...] = ()
    """Origins (``https://ui.example.com``) whose browser pages may call the API."""
    max_body_bytes: int = DEFAULT_MAX_BODY
    open_paths: frozenset[str] = field(default_factory=lambda: frozenset({"/healthz", "/readyz"}))
    keys_file: Path | None = None
    """More keys (``NOETA_API_KEYS_FILE``), read again by the guard whenever the file changes."""
    keys_dsn: str | None = None
    """More keys in a PostgreSQL table (``NOETA_API_KEYS_DSN``; :mod:`noeta.security.key_table`)."""
    keys_table: str = DEFAULT_TABLE
    """That table (``NOETA_API_KEYS_TABLE``)."""
    keys_refresh_seconds: float = DEFAULT_REFRESH_SECONDS
    """How old the keys read from the table may be before a request reads them again."""

    @property
    def authenticating(self) -> bool:
        """Whether requests need a key."""
        return bool(self.api_keys) or self.keys_file is not None or self.keys_dsn is not None

    def fixed_keys(self) -> tuple[ApiKey, ...]:
        """``api_keys`` as ApiKey records (a bare secret: every role, tenant ``default``)."""
        return tuple(k if isinstance(k, ApiKey) else ApiKey(k) for k in self.api_keys)

    def __repr__(self) -> str:  # never print keys
        """The configuration without its keys (only how many there are)."""
        return (
            f"GuardConfig(api_keys=<{len(self.api_keys)}>, keys_file={self.keys_file!r}, "
            f"keys_table={self.keys_table if self.keys_dsn else None!r}, allowed_hosts={self.allowed_hosts!r}, "
            f"cors_origins={self.cors_origins!r}, max_body_bytes={self.max_body_bytes})"
        )

    @classmethod
    def from_env(
        cls, prefix: str = "NOETA", bind_host: str | None = None, env: Mapping[str, str] | None = None, **overrides: Any
    ) -> GuardConfig:
        """The guard of ``noeta serve`` (prefix ``NOETA``: :class:`ServerSettings`) or of ``noeta
        codec-server`` (``NOETA_CODEC``: :class:`CodecServerSettings`), from ``env`` (None: the
        process's environment). The bind host is always allowed."""
        settings: GuardSettings
        if prefix == "NOETA":
            settings = ServerSettings.from_env(env)
        elif prefix == "NOETA_CODEC":
            settings = CodecServerSettings.from_env(env)
        else:
            raise ValueError(f"no HTTP server reads settings prefixed {prefix!r}")
        return settings.guard(bind_host, **overrides)

    def check_bind(self, host: str, allow_unauthenticated: bool = False) -> None:
        """Refuse to listen beyond loopback without keys (unless explicitly allowed)."""
        if not self.authenticating and host_of(host) not in LOOPBACK_HOSTS and not allow_unauthenticated:
            raise ConfigurationError(
                f"refusing to listen on {host} without authentication: set NOETA_API_KEYS (or _FILE), "
                "or bind 127.0.0.1 behind an authenticating proxy"
            )


class GuardSettings(EnvSettings):
    """What an HTTP server's guard is configured with, from keyword arguments, else the variables
    (comma-separated lists), else the defaults."""

    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    """``*_ALLOWED_HOSTS``: host names requests may address (lower-cased; ``*`` for any)."""
    cors_origins: tuple[str, ...] = ()
    """``*_CORS_ORIGINS``: origins whose browser pages may call the server."""
    allow_unauthenticated: bool = Field(default=False, validation_alias="NOETA_ALLOW_UNAUTHENTICATED")
    """``1``: listen beyond loopback without credentials (behind an authenticating proxy); any
    other value is off."""

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _hosts(cls, raw: Any) -> Any:
        hosts = csv(raw)
        return tuple(h.lower() for h in hosts) if isinstance(hosts, tuple) else hosts

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, raw: Any) -> Any:
        origins = csv(raw)
        return tuple(o.rstrip("/") for o in origins) if isinstance(origins, tuple) else origins

    @field_validator("allow_unauthenticated", mode="before")
    @classmethod
    def _flag(cls, raw: Any) -> Any:
        # Only the exact "1" opts out of authentication, as documented: a stray "yes" keeps it on.
        return raw == "1" if isinstance(raw, str) else raw

    def credentials(self) -> tuple[str, ...]:
        """The keys a request may present (a keys file is read now)."""
        return ()

    def guard(self, bind_host: str | None = None, **overrides: Any) -> GuardConfig:
        """The GuardConfig of these settings; ``bind_host`` is added to the allowed hosts."""
        hosts = self.allowed_hosts or LOOPBACK_HOSTS
        if bind_host and bind_host not in ("0.0.0.0", "::") and host_of(bind_host) not in hosts:
            hosts = (*hosts, host_of(bind_host))
        return GuardConfig(api_keys=self.credentials(), allowed_hosts=hosts, cors_origins=self.cors_origins, **overrides)


class ServerSettings(GuardSettings):
    """``noeta serve``'s guard: ``NOETA_API_KEYS``, ``NOETA_API_KEYS_FILE``, ``NOETA_ALLOWED_HOSTS``,
    ``NOETA_CORS_ORIGINS``, ``NOETA_ALLOW_UNAUTHENTICATED``."""

    api_keys: tuple[str, ...] = ()
    """Accepted credentials, at least 16 characters each."""
    api_keys_file: Path | None = None
    """More credentials, one per line (``#`` comments); read each time the guard is built."""
    api_keys_dsn: str | None = Field(default=None, repr=False)
    """``NOETA_API_KEYS_DSN``: a PostgreSQL database whose table holds more keys."""
    api_keys_table: str = DEFAULT_TABLE
    """``NOETA_API_KEYS_TABLE``: that table."""

    _keys = field_validator("api_keys", mode="before")(_secrets)

    def credentials(self) -> tuple[str, ...]:
        """The secrets of ``NOETA_API_KEYS`` and of ``NOETA_API_KEYS_FILE``."""
        return read_keys(",".join(self.api_keys), self.api_keys_file, self.variable("api_keys"))

    def admin_credentials(self) -> tuple[str, ...]:
        """The secrets of the keys with the admin role: every key of ``NOETA_API_KEYS`` and of the
        keys file's lines that name no roles, and the file's keys that name ``admin``. A payload
        decoded is any tenant's, so only these may stand in for the codec server's own tokens."""
        keys = list(self.api_keys)
        if self.api_keys_file is not None:
            what = f"the {self.variable('api_keys_file')} file"
            keys += [key.secret for key in read_key_file(self.api_keys_file, what) if "admin" in key.roles]
        return _long_enough(tuple(keys), self.variable("api_keys"))

    def guard(self, bind_host: str | None = None, **overrides: Any) -> GuardConfig:
        """The GuardConfig of these settings: ``NOETA_API_KEYS`` (every role, tenant ``default``)
        and the keys file, which the guard reads again whenever it changes (it is read once now,
        so a bad file stops the server at its start)."""
        if self.api_keys_file is not None:
            read_key_file(self.api_keys_file, f"the {self.variable('api_keys_file')}")
        config = super().guard(bind_host, **overrides)
        return dataclasses.replace(
            config, api_keys=self.api_keys, keys_file=self.api_keys_file, keys_dsn=self.api_keys_dsn,
            keys_table=self.api_keys_table,
        )


class CodecServerSettings(GuardSettings):
    """``noeta codec-server``'s guard: ``NOETA_CODEC_TOKENS``, ``NOETA_CODEC_TOKENS_FILE``,
    ``NOETA_CODEC_ALLOWED_HOSTS``, ``NOETA_CODEC_CORS_ORIGINS``, ``NOETA_ALLOW_UNAUTHENTICATED``."""

    model_config = SettingsConfigDict(env_prefix="NOETA_CODEC_")

    tokens: tuple[str, ...] = ()
    """Accepted bearer tokens, at least 16 characters each (none: ``noeta serve``'s API keys)."""
    tokens_file: Path | None = None
    """More tokens, one per line (``#`` comments); read each time the guard is built."""

    _tokens = field_validator("tokens", mode="before")(_secrets)

    def credentials(self) -> tuple[str, ...]:
        """``NOETA_CODEC_TOKENS`` and the tokens of ``NOETA_CODEC_TOKENS_FILE``."""
        return read_keys(",".join(self.tokens), self.tokens_file, self.variable("tokens"))


#: Where the guard leaves the id of the request's API key for the app (``request.state``).
KEY_ID_STATE = "noeta_api_key_id"
#: Where the guard leaves who the request acts as (a Principal) for the app (``request.state``).
PRINCIPAL_STATE = "noeta_principal"
#: The key id of requests to a server without API keys.
ANONYMOUS_KEY_ID = ANONYMOUS.key_id


def key_matches(presented: str, keys: Iterable[str]) -> bool:
    """Constant-time comparison against every key (no early exit that would leak which matched)."""
    found = False
    for key in keys:
        found |= hmac.compare_digest(presented.encode(), key.encode())
    return found


class RequestGuard:
    """ASGI middleware enforcing a :class:`GuardConfig` (see the module docstring)."""

    def __init__(self, app: ASGIApp, config: GuardConfig) -> None:
        """``app``: the application behind the guard; ``config``: what it enforces (a keys file
        is read now and again whenever it changes)."""
        self.app, self.config = app, config
        self._fixed = config.fixed_keys()
        self._file = KeyFile(config.keys_file) if config.keys_file is not None else None
        self._table = (
            KeyTable(config.keys_dsn, config.keys_table, config.keys_refresh_seconds) if config.keys_dsn else None
        )

    async def keys(self) -> tuple[ApiKey, ...]:
        """The keys accepted now: the configured ones, the keys file's and the table's current ones."""
        keys = self._fixed + (self._file.current() if self._file is not None else ())
        return keys + (await self._table.current() if self._table is not None else ())

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
        principal = ANONYMOUS
        if self.config.authenticating:
            key = matching_key(_credential(headers), await self.keys())
            if key is None:
                await _reply(send, 401, "Unauthorized", "a valid API key is required", [(b"www-authenticate", b"Bearer"), *cors])
                return
            principal = Principal.of(key)
        # Who acts (tenant, roles, the name approvals record) and which key spends (its quota).
        state = scope.setdefault("state", {})
        state[PRINCIPAL_STATE], state[KEY_ID_STATE] = principal, principal.key_id
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
