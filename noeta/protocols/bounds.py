"""The allowed range of every numeric task setting, activity options included, checked at every entry.

``Options`` checks them when it is built (so the Python API, ``noeta serve`` and the CLI refuse a
bad value before anything starts, naming the range), and the workflow checks its ``TaskInput``
again before its first step, so an input that reached Temporal another way fails the task with a
``ConfigurationError`` instead of failing workflow tasks forever (``timedelta(seconds=nan)`` raises
inside the workflow; a retry count past 2³¹ overflows Temporal's retry policy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from noeta.protocols.activity_options import ACTIVITY_KINDS, ActivityOptions
from noeta.protocols.tool_output_cap import MIN_TOOL_OUTPUT_TOKENS
from noeta.protocols.compaction import Compaction
from noeta.protocols.local_model_calls import local_model_problem

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class Bound:
    """The allowed range of one numeric setting."""
    lowest: float
    highest: float
    whole: bool
    """A whole number (an int, not a bool); else any finite number."""
    above_lowest: bool = False
    """The lowest value itself is not allowed (timeouts must be > 0)."""
    optional: bool = False
    """None means "not set" (the provider's or Temporal's default)."""

    def describe(self) -> str:
        """The range in words, for an error message (``a whole number from 0 to 100``)."""
        kind = "a whole number" if self.whole else "a number"
        low = f"above {self.lowest:g}" if self.above_lowest else f"from {self.lowest:g}"
        return f"{kind} {low} to {self.highest:g}"

    def allows(self, value: Any) -> bool:
        """Whether ``value`` is a finite number (an int where whole numbers are required, never a
        bool) within the range."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.whole and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        above = value > self.lowest if self.above_lowest else value >= self.lowest
        return above and value <= self.highest


#: Task settings by their Options / TaskInput name.
BOUNDS: dict[str, Bound] = {
    "max_turns": Bound(1, 10_000, whole=True),
    # Retries beyond 100 are a mistake, not a policy (each retry waits up to a minute).
    "max_retries": Bound(0, 100, whole=True),
    "provider_retries": Bound(0, 100, whole=True, optional=True),
    "tool_retries": Bound(0, 100, whole=True, optional=True),
    "temperature": Bound(0, 2, whole=False, optional=True),
    "max_tokens": Bound(1, 10_000_000, whole=True, optional=True),
    "model_timeout_seconds": Bound(0, 7 * DAY, whole=False, above_lowest=True),
    "tool_timeout_seconds": Bound(0, 7 * DAY, whole=False, above_lowest=True),
    "approval_timeout_seconds": Bound(0, 366 * DAY, whole=False, above_lowest=True),
    # A step takes ~12 events; the server terminates a run at 51,200.
    "max_history_events": Bound(20, 50_000, whole=True, optional=True),
    "rate_limit_wait_seconds": Bound(0, DAY, whole=False),
    "store_outage_wait_seconds": Bound(0, DAY, whole=False),
    "index_interval_seconds": Bound(1, DAY, whole=False, optional=True),
    # Below 1,024 a preview would be mostly its note; above 10M it is no cap.
    "max_tool_output_tokens": Bound(MIN_TOOL_OUTPUT_TOKENS, 10_000_000, whole=True, optional=True),
    "context_window_tokens": Bound(256, 100_000_000, whole=True, optional=True),
}


#: The fields of every ActivityOptions (``Options.model_activity.start_to_close_seconds``...).
ACTIVITY_BOUNDS: dict[str, Bound] = {
    "start_to_close_seconds": Bound(0, 7 * DAY, whole=False, above_lowest=True, optional=True),
    "schedule_to_close_seconds": Bound(0, 366 * DAY, whole=False, above_lowest=True, optional=True),
    # The worker heartbeats every third of it, at most every 0.2 s.
    "heartbeat_seconds": Bound(1, DAY, whole=False),
    "retry_initial_seconds": Bound(0, DAY, whole=False, above_lowest=True),
    # Temporal refuses a coefficient below 1 (waits that shrink).
    "retry_backoff_coefficient": Bound(1, 100, whole=False),
    "retry_max_seconds": Bound(0, DAY, whole=False, above_lowest=True),
}


def bound_problem(name: str, value: Any, bounds: dict[str, Bound] = BOUNDS, label: str | None = None) -> str | None:
    """Why ``value`` is not allowed for the setting ``name`` of ``bounds`` (with the allowed range),
    or None. ``label`` names the setting in the message (default: ``name``)."""
    bound = bounds[name]
    if (value is None and bound.optional) or bound.allows(value):
        return None
    return f"{label or name} must be {bound.describe()}, got {value!r}"


def activity_options_problem(kind: str, options: Any) -> str | None:
    """What is wrong with the ActivityOptions of the field ``kind`` (e.g. ``tool_activity``), or None."""
    if not isinstance(options, ActivityOptions):
        return f"{kind} must be an ActivityOptions, got {options!r}"
    for name in ACTIVITY_BOUNDS:
        problem = bound_problem(name, getattr(options, name), ACTIVITY_BOUNDS, f"{kind}.{name}")
        if problem is not None:
            return problem
    if options.retry_max_seconds < options.retry_initial_seconds:
        return (
            f"{kind}.retry_max_seconds ({options.retry_max_seconds:g}) must not be below "
            f"{kind}.retry_initial_seconds ({options.retry_initial_seconds:g})"
        )
    return None


def settings_problem(settings: Any) -> str | None:
    """The first setting of ``settings`` (an Options or a TaskInput) out of its range, or None."""
    for name in BOUNDS:
        if hasattr(settings, name):
            problem = bound_problem(name, getattr(settings, name))
            if problem is not None:
                return problem
    for kind in ACTIVITY_KINDS:
        if hasattr(settings, kind):
            problem = activity_options_problem(kind, getattr(settings, kind))
            if problem is not None:
                return problem
    local = local_model_problem(settings)
    if local is not None:
        return local
    compaction = getattr(settings, "compaction", None)
    if compaction is not None:
        if not isinstance(compaction, Compaction):
            return f"compaction must be a Compaction or None, got {compaction!r}"
        return compaction.problem()
    return None
