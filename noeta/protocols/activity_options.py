"""ActivityOptions: how Temporal runs one kind of activity (its timeouts, heartbeat and retry backoff).

``Options`` has one per kind, carried in the task's input and turned into Temporal's activity
options by :mod:`noeta.workflows.steps`:

===================== ================================== ===========================================
Options field          activities                         start-to-close when not set
===================== ================================== ===========================================
``model_activity``     ``noeta.call_model``               300 s (or the deprecated
                                                          ``Options.model_timeout_seconds``)
``tool_activity``      ``noeta.invoke_tool`` (own tools)  the tool's ``@tool(timeout_seconds=)``, else
                                                          ``Options.tool_timeout_seconds`` (300 s)
``mcp_activity``       ``noeta.invoke_tool`` (remote MCP  ``Options.tool_timeout_seconds`` (300 s)
                       servers' tools)
``guard_activity``     ``noeta.check_guards``             60 s
``validator_activity`` ``noeta.validate_output``          ``Options.tool_timeout_seconds`` (300 s)
===================== ================================== ===========================================

Every other default is the same for every kind: no schedule-to-close limit, a 10 s heartbeat
timeout, retries after 1 s, 2 s, 4 s ... up to 60 s. How many attempts a call may make is not
an activity option: ``max_retries`` (``provider_retries``, ``tool_retries``) decides it. The ranges
are on the fields (noeta.protocols.setting) and checked with every other numeric setting
(:mod:`noeta.protocols.bounds`): where ``Options`` is built, and again by the workflow before its
first step.
"""

from __future__ import annotations

from dataclasses import dataclass

from noeta.protocols.attempts import RetryBackoff
from noeta.protocols.setting import DAY, setting

#: A worker silent this long while running a tool or a model call is presumed dead, and Temporal
#: retries the call on another worker (a tool's own ``heartbeat_seconds`` overrides it). The
#: activities heartbeat every third of it while they run.
DEFAULT_HEARTBEAT_SECONDS = 10.0
#: A guard check's start-to-close timeout when ``guard_activity`` sets none.
GUARD_TIMEOUT_SECONDS = 60.0
#: Longest backoff before retrying a model or tool call whose worker was lost (killed, or its
#: completion never reached the server): another worker is usually there to take the call.
LOST_ATTEMPT_MAX_BACKOFF_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class ActivityOptions:
    """Timeouts, heartbeat and retry backoff of one kind of activity (see the table above)."""

    start_to_close_seconds: float | None = setting(None, gt=0, le=7 * DAY)
    """Longest one attempt may run; the worker stops the work a moment before and records a
    timeout. None: the kind's default (the table above)."""
    schedule_to_close_seconds: float | None = setting(None, gt=0, le=366 * DAY)
    """Longest the call may take in all, its attempts and the waits between them included; past it
    Temporal stops retrying. None: no limit beyond the number of attempts."""
    # The worker heartbeats every third of it, at most every 0.2 s.
    heartbeat_seconds: float = setting(DEFAULT_HEARTBEAT_SECONDS, ge=1, le=DAY)
    """A worker silent this long while it runs the call is presumed dead and the call is retried
    elsewhere (a tool's own ``@tool(heartbeat_seconds=)`` wins for that tool)."""
    retry_initial_seconds: float = setting(1.0, gt=0, le=DAY)
    """Wait before the first retry."""
    # Temporal refuses a coefficient below 1 (waits that shrink).
    retry_backoff_coefficient: float = setting(2.0, ge=1, le=100)
    """Each further wait is the previous one times this."""
    retry_max_seconds: float = setting(60.0, gt=0, le=DAY)
    """Longest wait between two attempts. A provider's ``retry-after`` overrides the backoff; a
    model or tool call whose worker was lost waits at most LOST_ATTEMPT_MAX_BACKOFF_SECONDS."""

    def backoff(self) -> RetryBackoff | None:
        """The backoff a model or tool call's worker applies, None when it is the default one."""
        chosen = RetryBackoff(self.retry_initial_seconds, self.retry_backoff_coefficient, self.retry_max_seconds)
        return None if chosen == RetryBackoff() else chosen


#: The ``Options`` / ``TaskInput`` fields that hold an ActivityOptions, one per kind of activity.
ACTIVITY_KINDS = ("model_activity", "tool_activity", "mcp_activity", "guard_activity", "validator_activity")
