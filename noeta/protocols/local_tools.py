"""Local tools: a tool declared ``local=True`` runs as a Temporal local activity, on the worker that
runs the task's workflow, recorded as one marker event instead of an activity's three events and
a workflow task of its own.

A local activity has no heartbeat (a killed worker is noticed when its workflow task times out,
10 s, and the call runs again from its first attempt on another worker) and holds the workflow
task while it runs: past about 8 s the worker has to report the workflow task as still alive,
one more workflow task each time. So a local tool's attempt is bounded: LOCAL_TOOL_TIMEOUT_SECONDS
unless the tool sets ``timeout_seconds``, and never more than LOCAL_TOOL_MAX_TIMEOUT_SECONDS.
"""

from __future__ import annotations

from noeta.errors import ToolDefinitionError

#: A local tool's attempt timeout when it sets none.
LOCAL_TOOL_TIMEOUT_SECONDS = 5.0
#: The longest attempt a local tool may declare: longer work belongs in an ordinary activity.
LOCAL_TOOL_MAX_TIMEOUT_SECONDS = 30.0


def check_local_tool(name: str, timeout_seconds: float | None, heartbeat_seconds: float | None) -> None:
    """Refuse a local tool whose options a local activity cannot honour (ToolDefinitionError): a
    timeout above LOCAL_TOOL_MAX_TIMEOUT_SECONDS, or a heartbeat (local activities cannot
    heartbeat)."""
    if heartbeat_seconds is not None:
        raise ToolDefinitionError(
            f"tool {name!r}: a local tool cannot heartbeat (heartbeat_seconds is for ordinary tools)"
        )
    if timeout_seconds is not None and not 0 < timeout_seconds <= LOCAL_TOOL_MAX_TIMEOUT_SECONDS:
        raise ToolDefinitionError(
            f"tool {name!r}: a local tool's timeout_seconds must be above 0 and at most "
            f"{LOCAL_TOOL_MAX_TIMEOUT_SECONDS:g} s, got {timeout_seconds:g}; declare a longer tool without local=True"
        )


def local_attempt_seconds(timeout_seconds: float | None) -> float:
    """A local tool's attempt timeout: its own, else LOCAL_TOOL_TIMEOUT_SECONDS."""
    return timeout_seconds if timeout_seconds is not None else LOCAL_TOOL_TIMEOUT_SECONDS


__all__ = ["LOCAL_TOOL_MAX_TIMEOUT_SECONDS", "LOCAL_TOOL_TIMEOUT_SECONDS", "check_local_tool", "local_attempt_seconds"]
