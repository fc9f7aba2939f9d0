"""``Options.mcp_servers`` entries checked and turned into :class:`McpServerConfig`, and the
``${NAME}`` references in them resolved on the worker.

Task input is recorded in history and visible to whoever can read the task, so it must never hold
a secret. Header and environment values whose names look like credentials must therefore be
``${NAME}`` references, and a worker resolves only names beginning with ``MCP_``: a task cannot
make a worker send just any variable of its environment to a server the task chose.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from noeta.errors import ConfigurationError, McpServerNotAllowedError
from noeta.protocols.mcp import McpServerConfig

#: Only these variables of a worker's environment can be referenced from a server configuration.
ENV_PREFIX = "MCP_"
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_SECRET_NAME = re.compile(r"auth|token|secret|passw|api[-_]?key|cookie|credential|private", re.IGNORECASE)
_KEYS = {
    "stdio": {"type", "command", "args", "env", "cwd"},
    "http": {"type", "url", "headers"},
}


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
        config = McpServerConfig(type="stdio", command=command, args=list(args), env=env, cwd=cwd)
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
        config = McpServerConfig(type="http", url=url, headers=headers)
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
    )
    return resolved, used
