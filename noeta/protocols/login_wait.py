"""A user's MCP login that lacks a scope a tool call needs (``403 insufficient_scope``), as a
durable wait of the task: the worker cannot log in for a person (it opens no browser), so the call
stops with ``McpLoginRequiredError`` carrying what the login needs, the workflow lists it among the
task's pending approvals (a :class:`LoginRequest` action, with the command that logs in again) and
waits durably until the operator has logged in and says so (``approve``; a refusal or the approvals'
timeout fails the call with the error). The call is then made again, and the worker reads the new
tokens from the store every worker reads. Pure: the workflow and the client use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from noeta.protocols.server_requests import ServerRequest

#: The ApplicationError type of a tool call that stopped for a new login.
LOGIN_REQUIRED = "McpLoginRequiredError"
#: At most this many logins per tool call: a server that keeps asking for more fails the call.
MAX_LOGINS_PER_CALL = 3


@dataclass(frozen=True, slots=True)
class LoginRequest(ServerRequest):
    """A tool call waiting for the operator to log in again with more scope. Its ``call_id``
    (``login:<tool call id>:<n>``) is what ``approve`` (logged in: make the call again) and
    ``refuse`` (give up: the call fails) name."""
    url: str
    scope: str
    """The scopes the new login asks for: those granted so far and those the server named."""
    command: str
    """What the operator runs to log in again (``noeta mcp login ...``)."""
    message: str = ""
    type: Literal["login"] = field(default="login", kw_only=True)


def login_wait_id(tool_call_id: str, index: int) -> str:
    """The id of the ``index``-th (from 1) login a tool call waits for."""
    return f"login:{tool_call_id}:{index}"


def login_command(alias: str, url: str, scope: str) -> str:
    """The command that logs in to ``url`` again asking for ``scope``."""
    return f"noeta mcp login {alias} --url {url} --scope '{scope}'"


__all__ = ["LOGIN_REQUIRED", "MAX_LOGINS_PER_CALL", "LoginRequest", "login_command", "login_wait_id"]
