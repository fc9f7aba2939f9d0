"""Which MCP server URLs a task may make this process's workers connect to: the operator's
allow-list (``NOETA_MCP_URLS``), private address ranges refused unless a pattern names them, and no
credentials inside URLs.

Whoever may start a task chooses its MCP servers, and the worker connects to them from inside the
operator's network; without a limit a task could point it at internal services or a cloud's
metadata endpoint (``169.254.169.254``). The same rule is applied twice: when a task is started
(the client, on the URL as written: literal addresses and ``localhost``, no connection and no DNS
lookup), and on the worker before every request it sends to a server or its authorization server
(after ``${MCP_*}`` references are resolved, on every address the host name resolves to, and on
redirects). Pure: no I/O here beyond reading the setting; resolving names is the caller's.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import field_validator

from noeta.config.settings import EnvSettings, csv
from noeta.errors import McpUrlNotAllowedError
from noeta.protocols.mcp import McpServerConfig

#: The setting's variable (named once, here and in the settings below).
VARIABLE = "NOETA_MCP_URLS"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


class McpUrlSettings(EnvSettings):
    """The operator's allow-list of MCP server URLs, read where tasks are started and by workers."""

    mcp_urls: tuple[str, ...] | None = None
    """``NOETA_MCP_URLS``: comma-separated URL patterns (``https://*.example.com/*``,
    ``http://127.0.0.1:*``). Unset: any URL whose host is a public address. Set: only URLs that
    match a pattern. A private, loopback, link-local or otherwise special address is allowed only
    by a pattern that names its host without a wildcard."""

    @field_validator("mcp_urls", mode="before")
    @classmethod
    def _patterns(cls, raw: Any) -> Any:
        patterns = csv(raw)
        for pattern in patterns or ():
            UrlPattern.parse(pattern)  # a malformed pattern stops the process that reads it
        return patterns


@dataclass(frozen=True)
class UrlPattern:
    """``scheme://host[:port][/path]``: ``*`` or ``*.domain`` as the host, ``*`` as the port (no
    port: the scheme's default), a path glob (none: any path)."""

    scheme: str
    host: str
    port: str
    path: str

    @classmethod
    def parse(cls, text: str) -> UrlPattern:
        """The pattern ``text``; McpUrlNotAllowedError (a ConfigurationError) when malformed."""
        scheme, sep, rest = text.strip().partition("://")
        if not sep or scheme.lower() not in _DEFAULT_PORTS or not rest:
            raise McpUrlNotAllowedError(f"{VARIABLE}: {text!r} is not an http:// or https:// URL pattern")
        authority, slash, path = rest.partition("/")
        if "@" in authority:
            raise McpUrlNotAllowedError(f"{VARIABLE}: a pattern holds no credentials ({redact(text)!r})")
        if authority.startswith("["):  # an IPv6 literal: [::1]:8000
            host, _, port = authority[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = authority.partition(":")
        port = port or str(_DEFAULT_PORTS[scheme.lower()])
        if not host or (port != "*" and not port.isdigit()) or ("*" in host and host != "*" and not host.startswith("*.")):
            raise McpUrlNotAllowedError(
                f"{VARIABLE}: {text!r}: the host is a name, an address, '*' or '*.domain', the port a number or '*'"
            )
        return cls(scheme.lower(), host.lower(), port, "/" + path if slash else "/*")

    @property
    def names_host(self) -> bool:
        """True when the pattern names its host exactly (no wildcard): only such a pattern opens a
        private address."""
        return "*" not in self.host

    def matches(self, scheme: str, host: str, port: int, path: str) -> bool:
        """Whether a URL's parts match."""
        if scheme != self.scheme or (self.port != "*" and int(self.port) != port):
            return False
        if self.host != "*" and not (host == self.host or (self.host.startswith("*.") and host.endswith(self.host[1:]))):
            return False
        return fnmatch.fnmatchcase(path or "/", self.path)


def redact(url: str) -> str:
    """``url`` without the user and password of its authority (``https://***@host/``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{tail}"


def special_address(host: str) -> str | None:
    """Why ``host`` (an address, or ``localhost``) is not a public address (None: it is, or it is a
    name that only DNS can tell)."""
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return "a loopback address"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for kind, test in (
        ("a loopback address", address.is_loopback),
        ("a link-local address (cloud metadata endpoints live there)", address.is_link_local),
        ("a private address", address.is_private),
        ("an unspecified, multicast or reserved address", address.is_unspecified or address.is_multicast or address.is_reserved),
        ("a non-public address", not address.is_global),
    ):
        if test:
            return kind
    return None


class UrlPolicy:
    """The allow-list applied to a URL: :meth:`check` raises McpUrlNotAllowedError when refused."""

    def __init__(self, patterns: Iterable[str] | None) -> None:
        """``patterns``: the allow-list (None: any public address)."""
        self.patterns = None if patterns is None else tuple(UrlPattern.parse(p) for p in patterns)

    @classmethod
    def from_env(cls) -> UrlPolicy:
        """The policy ``NOETA_MCP_URLS`` gives this process."""
        return cls(McpUrlSettings().mcp_urls)

    def check(self, where: str, url: str, addresses: Iterable[str] = ()) -> None:
        """Refuse ``url`` (with McpUrlNotAllowedError naming ``where`` and what to do) unless it is
        allowed; ``addresses``: what its host resolved to (a worker checks each of them)."""
        parts = urlsplit(url)
        shown = redact(url)
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise McpUrlNotAllowedError(
                f"{where}: {shown} holds credentials; a URL is recorded in the task's history, so send them as a "
                "header with a ${MCP_*} reference or give the server an 'auth' entry", url=shown,
            )
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        try:
            port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
        except ValueError:
            raise McpUrlNotAllowedError(f"{where}: {shown} has an invalid port", url=shown) from None
        if scheme not in _DEFAULT_PORTS or not host:
            raise McpUrlNotAllowedError(f"{where}: {shown} is not an http:// or https:// URL", url=shown)
        path = parts.path or "/"
        matching = [p for p in self.patterns or () if p.matches(scheme, host, port, path)]
        if self.patterns is not None and not matching:
            raise McpUrlNotAllowedError(
                f"{where}: {shown} is not on this deployment's allow-list of MCP server URLs ({VARIABLE}); "
                f"an operator can add a pattern such as {scheme}://{_authority(scheme, host, port)}/*", url=shown,
            )
        named = any(p.names_host for p in matching)
        for candidate in (host, *addresses):
            kind = special_address(candidate)
            if kind is not None and not named:
                resolved = "" if candidate == host else f" (its host resolves to {candidate})"
                raise McpUrlNotAllowedError(
                    f"{where}: {shown} is {kind}{resolved}; MCP servers there are refused unless an operator lists "
                    f"the host in {VARIABLE} (e.g. {scheme}://{_authority(scheme, host, port)}/*) where tasks are "
                    "started and on the workers", url=shown,
                )


def check_servers(servers: Mapping[str, McpServerConfig], policy: UrlPolicy) -> None:
    """Where a task is started: refuse any http server of ``servers`` whose URL ``policy`` refuses.
    A URL whose host is a ``${MCP_*}`` reference is left to the worker, which resolves it."""
    for alias, config in servers.items():
        if config.type == "http" and config.url and "${" not in urlsplit(config.url).netloc.rpartition("@")[2]:
            policy.check(f"mcp_servers[{alias!r}]", config.url)


def _authority(scheme: str, host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port == _DEFAULT_PORTS.get(scheme) else f"{shown}:{port}"


__all__ = ["McpUrlSettings", "check_servers", "UrlPattern", "UrlPolicy", "VARIABLE", "redact", "special_address"]
