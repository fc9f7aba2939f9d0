"""``Options.mcp_servers`` entries checked and turned into :class:`McpServerConfig`, and the
``${NAME}`` references in them resolved on the worker.

Task input is recorded in history and visible to whoever can read the task, so it must never hold
a secret. Header and environment values whose names look like credentials must therefore be
``${NAME}`` references, and a worker resolves only names beginning with ``MCP_``: a task cannot
make a worker send just any variable of its environment to a server the task chose.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from noeta.errors import ConfigurationError, McpServerNotAllowedError, McpUrlNotAllowedError
from noeta.protocols.mcp import McpOAuthConfig, McpServerConfig
from noeta.mcp.outbound import UrlPolicy, check_servers, redact

#: Only these variables of a worker's environment can be referenced from a server configuration.
ENV_PREFIX = "MCP_"
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_SECRET_NAME = re.compile(r"auth|token|secret|passw|api[-_]?key|cookie|credential|private", re.IGNORECASE)
_KEYS = {
    "stdio": {"type", "command", "args", "env", "cwd", "local", "sampling"},
    "http": {"type", "url", "headers", "auth", "local", "sampling"},
}
_AUTH_KEYS = {f.name for f in fields(McpOAuthConfig)}
_GRANTS = ("client_credentials", "authorization_code")
_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none", "private_key_jwt")


def is_remote(server: Any) -> bool:
    """A remote server's configuration (a mapping or a config), not an in-process SdkMcpServer."""
    return isinstance(server, (Mapping, McpServerConfig))


def parse_server(alias: str, raw: Mapping[str, Any] | McpServerConfig) -> McpServerConfig:
    """The configuration of ``mcp_servers[alias]``; ConfigurationError says what is wrong."""
    where = f"mcp_servers[{alias!r}]"
    if not isinstance(alias, str) or not _ALIAS.fullmatch(alias) or "__" in alias:
        raise ConfigurationError(
            f"{where}: an alias is 1-32 letters, digits, '-' or '_' (no '__'), starting with a letter or digit"
        )
    data = {f.name: getattr(raw, f.name) for f in fields(raw)} if isinstance(raw, McpServerConfig) else dict(raw)
    kind = data.get("type")
    if kind not in _KEYS:
        raise ConfigurationError(f"{where}: type must be 'stdio' or 'http', got {kind!r}")
    unknown = sorted(set(data) - _KEYS[kind])
    if unknown:
        raise ConfigurationError(f"{where}: unknown key(s) for a {kind} server: {', '.join(unknown)}")
    local = data.get("local", False)
    sampling = data.get("sampling", False)
    if not isinstance(local, bool) or not isinstance(sampling, bool):
        raise ConfigurationError(f"{where}: local and sampling must be true or false")
    if kind == "stdio":
        command = data.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigurationError(f"{where}: a stdio server needs a command")
        args = data.get("args") or []
        if isinstance(args, (str, bytes)) or not all(isinstance(a, str) for a in args):
            raise ConfigurationError(f"{where}: args must be a list of strings")
        env = _strings(where, "env", data.get("env") or {})
        cwd = data.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ConfigurationError(f"{where}: cwd must be a string")
        config = McpServerConfig(type="stdio", command=command, args=list(args), env=env, cwd=cwd, local=local, sampling=sampling)
        _no_literal_secrets(where, "env", env)
        for arg in config.args:
            _check_references(where, arg)
    else:
        url = data.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"{where}: an http server needs an http:// or https:// url")
        headers = _strings(where, "headers", data.get("headers") or {})
        _no_literal_secrets(where, "headers", headers)
        _check_references(where, url)
        if "@" in url.partition("://")[2].partition("/")[0]:
            raise McpUrlNotAllowedError(
                f"{where}: {redact(url)} holds credentials; task input is recorded in history, so send them as a "
                "header with a ${MCP_*} reference or give the server an 'auth' entry", url=redact(url),
            )
        auth = data.get("auth")
        config = McpServerConfig(
            type="http", url=url, headers=headers, auth=None if auth is None else parse_auth(f"{where}.auth", auth),
            local=local, sampling=sampling,
        )
    return config


def allowed_at_start(servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
    """``servers``, once this process's ``NOETA_MCP_URLS`` allows each one's URL (checked where a
    task is started; McpUrlNotAllowedError otherwise, before anything is started or connects)."""
    check_servers(servers, UrlPolicy.from_env())
    return servers


def parse_auth(where: str, raw: Mapping[str, Any] | McpOAuthConfig) -> McpOAuthConfig:
    """An http server's ``auth`` entry; ConfigurationError says what is wrong. Secrets
    (``client_secret``, ``private_key``) must be ``${MCP_*}`` references."""
    if isinstance(raw, McpOAuthConfig):
        data: dict[str, Any] = {f.name: getattr(raw, f.name) for f in fields(raw)}
    elif isinstance(raw, Mapping):
        data = dict(raw)
    else:
        raise ConfigurationError(f"{where} must be a mapping of OAuth settings")
    unknown = sorted(set(data) - _AUTH_KEYS)
    if unknown:
        raise ConfigurationError(f"{where}: unknown key(s): {', '.join(unknown)} (known: {', '.join(sorted(_AUTH_KEYS))})")
    for name, value in data.items():
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"{where}: {name} must be a string")
        if value is not None:
            _check_references(where, value)
    grant = data.get("grant") or "client_credentials"
    if grant not in _GRANTS:
        raise ConfigurationError(f"{where}: grant must be one of {', '.join(_GRANTS)}, got {grant!r}")
    method = data.get("token_endpoint_auth_method")
    if method is not None and method not in _AUTH_METHODS:
        raise ConfigurationError(f"{where}: token_endpoint_auth_method must be one of {', '.join(_AUTH_METHODS)}")
    _no_literal_secrets(where, "auth", {k: data[k] for k in ("client_secret", "private_key") if data.get(k)})
    values: dict[str, Any] = {**data, "grant": grant, "signing_algorithm": data.get("signing_algorithm") or "RS256"}
    config = McpOAuthConfig(**values)
    jwt = method == "private_key_jwt" or (method is None and config.private_key)
    if grant == "client_credentials":
        if not config.client_id:
            raise ConfigurationError(f"{where}: the client_credentials grant needs a client_id")
        if jwt and not config.private_key:
            raise ConfigurationError(f"{where}: private_key_jwt needs a private_key (a ${{{ENV_PREFIX}*}} reference)")
        if not jwt and (method == "none" or not config.client_secret):
            raise ConfigurationError(
                f"{where}: the client_credentials grant needs a client_secret (basic or post) or a private_key"
            )
    elif jwt:
        raise ConfigurationError(f"{where}: private_key_jwt is supported for the client_credentials grant only")
    return config


def _strings(where: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigurationError(f"{where}: {key} must map strings to strings")
    return dict(value)


def _no_literal_secrets(where: str, key: str, values: Mapping[str, str]) -> None:
    for name, value in values.items():
        _check_references(where, value)
        if _SECRET_NAME.search(name) and not _REFERENCE.search(value):
            raise ConfigurationError(
                f"{where}: {key}[{name!r}] looks like a credential; task input is recorded in history, so "
                f"write a reference such as '${{{ENV_PREFIX}{_upper(name)}}}' and set that variable in the "
                "worker's environment"
            )


def _check_references(where: str, value: str) -> None:
    for name in _REFERENCE.findall(value):
        if not name.startswith(ENV_PREFIX):
            raise ConfigurationError(
                f"{where}: ${{{name}}} cannot be referenced; workers resolve only variables named "
                f"{ENV_PREFIX}* (e.g. ${{{ENV_PREFIX}{name}}})"
            )


def _upper(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper()


def resolve(alias: str, config: McpServerConfig, environ: Mapping[str, str]) -> tuple[McpServerConfig, list[str]]:
    """``config`` with its ``${MCP_*}`` references replaced by the worker's environment values, and
    the values used (secrets to scrub from errors and logs)."""
    used: list[str] = []

    def sub(value: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if not name.startswith(ENV_PREFIX):
                raise McpServerNotAllowedError(f"mcp_servers[{alias!r}]: ${{{name}}} is not an {ENV_PREFIX}* variable")
            if name not in environ:
                raise McpServerNotAllowedError(
                    f"mcp_servers[{alias!r}] refers to ${{{name}}}, which is not set in this worker's environment"
                )
            used.append(environ[name])
            return environ[name]

        return _REFERENCE.sub(one, value)

    resolved = McpServerConfig(
        type=config.type,
        command=config.command,
        args=[sub(a) for a in config.args],
        env={k: sub(v) for k, v in config.env.items()},
        cwd=config.cwd,
        url=sub(config.url) if config.url else None,
        headers={k: sub(v) for k, v in config.headers.items()},
        auth=None if config.auth is None else _resolve_auth(config.auth, sub),
        local=config.local,
        sampling=config.sampling,
    )
    return resolved, used


def _resolve_auth(auth: McpOAuthConfig, sub: Callable[[str], str]) -> McpOAuthConfig:
    values: dict[str, Any] = {f.name: getattr(auth, f.name) for f in fields(auth)}
    resolved: dict[str, Any] = {k: sub(v) if isinstance(v, str) else v for k, v in values.items()}
    return McpOAuthConfig(**resolved)
