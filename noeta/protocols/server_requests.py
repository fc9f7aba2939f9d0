"""What names a request a remote MCP server makes during a tool call (a question to a person, a
new login, a call of the task's model): the same four fields lead every such action and event.
Pure: the workflow, the worker and the client use it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerRequest:
    """A server's request during a tool call; each kind adds what it asks. Fields stay first in
    the kinds' payloads (their JSON keys keep their order)."""
    call_id: str
    """The request's id (``<kind>:<tool call id>:<n>``: ``elicit``, ``login``, ``sample``), what
    approvals and guards' verdicts name."""
    tool_call_id: str
    tool_name: str
    server: str
    """The server's alias (``mcp_servers`` key)."""


__all__ = ["ServerRequest"]
