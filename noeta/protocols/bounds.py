"""The allowed range of every numeric task setting, activity options included, checked at every entry.

The ranges are declared on the settings' fields (noeta.protocols.setting); this module reads them
into a Bound per setting and checks values against them.

``Options`` checks them when it is built (so the Python API, ``noeta serve`` and the CLI refuse a
bad value before anything starts, naming the range), and the workflow checks its ``TaskInput``
again before its first step, so an input that reached Temporal another way fails the task with a
``ConfigurationError`` instead of failing workflow tasks forever (``timedelta(seconds=nan)`` raises
inside the workflow; a retry count past 2³¹ overflows Temporal's retry policy).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Any

from noeta.protocols.activity_options import ACTIVITY_KINDS, ActivityOptions
from noeta.protocols.compaction import Compaction
from noeta.protocols.local_model_calls import local_model_problem
from noeta.protocols.setting import rule_of, unwrap_optional
from noeta.protocols.task_settings import TaskSettings


@dataclass(frozen=True, slots=True)
class Bound:
    """The allowed range of one numeric setting: its field's rule (noeta.protocols.setting) and
    what its type adds."""
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


def bounds_of(settings: type[Any]) -> dict[str, Bound]:
    """The Bound of every field of the dataclass ``settings`` that has a range, by name, in the
    order the fields are declared."""
    hints = typing.get_type_hints(settings)
    bounds: dict[str, Bound] = {}
    for item in dataclasses.fields(settings):
        rule = rule_of(item)
        if rule.lowest is None or rule.highest is None:
            continue
        number, optional = unwrap_optional(hints[item.name])
        if number not in (int, float):
            raise TypeError(f"{settings.__name__}.{item.name}: a range needs an int or float setting")
        bounds[item.name] = Bound(rule.lowest, rule.highest, number is int, rule.above_lowest, optional)
    return bounds


#: Task settings by their Options / TaskInput name.
BOUNDS: dict[str, Bound] = bounds_of(TaskSettings)

#: The fields of every ActivityOptions (``Options.model_activity.start_to_close_seconds``...).
ACTIVITY_BOUNDS: dict[str, Bound] = bounds_of(ActivityOptions)


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
