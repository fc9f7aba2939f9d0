"""Usage limits and the counters they are checked against: pure types, shared by the client that
sets the limits, the workflow that enforces them and the projection that reports them.

The workflow checks a task's :class:`UsageLimits` *before* each model call, tool round and subtask
(noeta.workflows.budget); tokens and cost live in :class:`~noeta.protocols.messages.Usage`, the
call counts in :class:`CallCounts`. docs/budgets.md says what each limit guarantees.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields
from typing import Any

from noeta.errors import ConfigurationError
from noeta.protocols.messages import Usage


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """Ceilings for one task, its continued runs and its sub-agents together (None: no limit).

    Token and cost limits stop the task before the next call once the total has *reached* the limit
    (a call's own size is known only after it): the last call may pass them by at most its own
    tokens or cost. ``max_output_tokens`` also lowers each call's ``max_tokens`` to what is left,
    so a provider that honours ``max_tokens`` never passes it. Count limits are exact.
    """

    max_input_tokens: int | None = None
    """Input tokens (uncached + cache read + cache write) of every model call."""
    max_output_tokens: int | None = None
    """Output tokens (reasoning included) of every model call."""
    max_total_tokens: int | None = None
    """Input plus output tokens."""
    max_model_calls: int | None = None
    """Model calls (a retried call counts once)."""
    max_tool_calls: int | None = None
    """Tool calls the agent makes, whatever their outcome (refused and unknown ones included)."""
    max_tool_calls_per_tool: dict[str, int] = field(default_factory=dict)
    """Tool calls of each named tool."""
    max_goal_seconds: float | None = None
    """Wall-clock time of one goal, from the goal's start (waits for approvals included)."""
    max_cost_usd: float | None = None
    """Cost in US dollars, from the worker's price table (docs/budgets.md); the model must have a price."""
    warn_at: float | None = 0.8
    """Fraction of a limit at which a BudgetWarning is recorded once per limit (None: no warnings)."""

    def __post_init__(self) -> None:
        """ConfigurationError unless every limit is a number >= 0 (or None) and the per-tool limits
        map tool names to counts."""
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "max_tool_calls_per_tool":
                if not isinstance(value, dict):
                    raise ConfigurationError("max_tool_calls_per_tool must map tool names to counts")
                for tool, count in value.items():
                    _check_count(f"max_tool_calls_per_tool[{tool!r}]", count)
            elif f.name == "warn_at":
                if value is not None and not (_is_number(value) and 0 < value < 1):
                    raise ConfigurationError(f"warn_at must be a fraction between 0 and 1 (exclusive), got {value!r}")
            elif f.name in ("max_goal_seconds", "max_cost_usd"):
                if value is not None and not (_is_number(value) and value > 0 and math.isfinite(value)):
                    raise ConfigurationError(f"{f.name} must be a number > 0, got {value!r}")
            elif value is not None:
                _check_count(f.name, value)

    @classmethod
    def from_dict(cls, data: Any) -> UsageLimits:
        """From JSON values (the HTTP API's ``options.limits``); unknown keys are a ConfigurationError."""
        if not isinstance(data, dict):
            raise ConfigurationError("limits must be a JSON object")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigurationError(f"unknown limit(s) {', '.join(unknown)}; allowed: {', '.join(known)}")
        return cls(**{k: v for k, v in data.items() if v is not None})

    def capped(self, max_cost_usd: float) -> UsageLimits:
        """These limits with the cost limit lowered to ``max_cost_usd`` (where it is higher or unset)."""
        cost = max_cost_usd if self.max_cost_usd is None else min(self.max_cost_usd, max_cost_usd)
        return dataclasses.replace(self, max_cost_usd=cost)

    def within(self, other: UsageLimits | None) -> UsageLimits:
        """The tighter of these limits and ``other`` for each field (a sub-agent's own limits within
        what its parent has left)."""
        if other is None:
            return self
        tighter: dict[str, Any] = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "max_tool_calls_per_tool":
                tighter[f.name] = {
                    name: min(v for v in (mine.get(name), theirs.get(name)) if v is not None)
                    for name in {*mine, *theirs}
                }
            elif f.name == "warn_at":
                tighter[f.name] = mine
            else:
                tighter[f.name] = theirs if mine is None else mine if theirs is None else min(mine, theirs)
        return UsageLimits(**tighter)

    @property
    def empty(self) -> bool:
        """No limit set (warn_at alone limits nothing)."""
        return all(
            getattr(self, f.name) in (None, {}) for f in fields(self) if f.name != "warn_at"
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_count(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigurationError(f"{name} must be an int >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class CallCounts:
    """Model and tool calls folded over a task (sub-agents included), like Usage for tokens."""

    model_calls: int = 0
    tool_calls: int = 0
    by_tool: dict[str, int] = field(default_factory=dict)
    """Tool calls per tool name."""

    def __add__(self, other: CallCounts) -> CallCounts:
        """The counts of both added up, tool by tool."""
        by_tool = dict(self.by_tool)
        for name, count in other.by_tool.items():
            by_tool[name] = by_tool.get(name, 0) + count
        return CallCounts(self.model_calls + other.model_calls, self.tool_calls + other.tool_calls, by_tool)

    def with_tools(self, names: list[str]) -> CallCounts:
        """A copy that counts one more call of each tool in ``names``."""
        by_tool = dict(self.by_tool)
        for name in names:
            by_tool[name] = by_tool.get(name, 0) + 1
        return CallCounts(self.model_calls, self.tool_calls + len(names), by_tool)


@dataclass(frozen=True, slots=True)
class LimitReading:
    """One limit of a task at one moment: how much it allows and how much is used."""

    limit: str
    """The UsageLimits field, e.g. ``max_cost_usd`` or ``max_tool_calls_per_tool[search]``."""
    allowed: float
    used: float

    @property
    def fraction(self) -> float:
        """The part of the limit used (infinite for a limit of 0)."""
        return self.used / self.allowed if self.allowed else math.inf


@dataclass(frozen=True, slots=True)
class Spend:
    """What a task has used so far: the totals its limits are checked against."""

    usage: Usage = field(default_factory=Usage)
    counts: CallCounts = field(default_factory=CallCounts)

    def to_details(self) -> dict[str, Any]:
        """JSON values for an error's details (how a failed sub-agent's spend reaches its parent)."""
        return {
            "usage": {f.name: getattr(self.usage, f.name) for f in fields(self.usage)},
            "counts": {"model_calls": self.counts.model_calls, "tool_calls": self.counts.tool_calls,
                       "by_tool": dict(self.counts.by_tool)},
        }

    @classmethod
    def from_details(cls, details: Any) -> Spend | None:
        """The spend in an error's details (``to_details``), or None when the details hold none."""
        if not isinstance(details, dict):
            return None
        usage, counts = details.get("usage"), details.get("counts")
        if not isinstance(usage, dict) or not isinstance(counts, dict):
            return None
        known = {f.name for f in fields(Usage)}
        return cls(
            Usage(**{k: v for k, v in usage.items() if k in known}),
            CallCounts(
                int(counts.get("model_calls", 0)), int(counts.get("tool_calls", 0)), dict(counts.get("by_tool", {}))
            ),
        )


def readings(limits: UsageLimits, spend: Spend, goal_seconds: float) -> list[LimitReading]:
    """Every limit that ``limits`` sets, read against ``spend`` and the goal's elapsed seconds."""
    usage, counts = spend.usage, spend.counts
    values: list[tuple[str, float | None, float]] = [
        ("max_input_tokens", limits.max_input_tokens, usage.input),
        ("max_output_tokens", limits.max_output_tokens, usage.output),
        ("max_total_tokens", limits.max_total_tokens, usage.input + usage.output),
        ("max_cost_usd", limits.max_cost_usd, usage.cost_usd),
        ("max_goal_seconds", limits.max_goal_seconds, goal_seconds),
        ("max_model_calls", limits.max_model_calls, counts.model_calls),
        ("max_tool_calls", limits.max_tool_calls, counts.tool_calls),
    ]
    values += [
        (f"max_tool_calls_per_tool[{name}]", allowed, counts.by_tool.get(name, 0))
        for name, allowed in limits.max_tool_calls_per_tool.items()
    ]
    return [LimitReading(name, allowed, used) for name, allowed, used in values if allowed is not None]


#: Limits that a call of unknown size is refused by once they are reached (checked before any call).
SPEND_LIMITS = ("max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost_usd", "max_goal_seconds")


def first_exceeded(
    limits: UsageLimits, spend: Spend, goal_seconds: float, *, model_calls: int = 0, tools: list[str] | None = None
) -> LimitReading | None:
    """The first limit that the next step would pass: a spend limit already reached, or a count
    that ``model_calls`` more model calls / the ``tools`` calls would take beyond its limit."""
    tools = tools or []
    extra: dict[str, int] = {"max_model_calls": model_calls, "max_tool_calls": len(tools)}
    for name in tools:
        key = f"max_tool_calls_per_tool[{name}]"
        extra[key] = extra.get(key, 0) + 1
    for reading in readings(limits, spend, goal_seconds):
        if reading.limit in SPEND_LIMITS:
            if reading.used >= reading.allowed:
                return reading
        elif reading.limit in extra and extra[reading.limit] and reading.used + extra[reading.limit] > reading.allowed:
            return reading
    return None


def remaining(limits: UsageLimits, spend: Spend, goal_seconds: float) -> UsageLimits:
    """What is left of ``limits`` after ``spend``: the limits a sub-agent gets."""

    def left(allowed: float | None, used: float) -> Any:
        return None if allowed is None else max(0, allowed - used)

    usage, counts = spend.usage, spend.counts
    goal_left = left(limits.max_goal_seconds, goal_seconds)
    cost_left = left(limits.max_cost_usd, usage.cost_usd)
    return UsageLimits(
        max_input_tokens=left(limits.max_input_tokens, usage.input),
        max_output_tokens=left(limits.max_output_tokens, usage.output),
        max_total_tokens=left(limits.max_total_tokens, usage.input + usage.output),
        max_model_calls=left(limits.max_model_calls, counts.model_calls),
        max_tool_calls=left(limits.max_tool_calls, counts.tool_calls),
        max_tool_calls_per_tool={
            name: max(0, allowed - counts.by_tool.get(name, 0)) for name, allowed in limits.max_tool_calls_per_tool.items()
        },
        # A float limit must stay > 0: a sub-agent whose parent has nothing left is refused by the
        # parent's own check before it starts.
        max_goal_seconds=None if goal_left is None else max(goal_left, 1e-3),
        max_cost_usd=None if cost_left is None else max(cost_left, 1e-9),
        warn_at=limits.warn_at,
    )


def limit_value(limits: UsageLimits, name: str) -> float | None:
    """The value of the limit a LimitReading names (``max_tool_calls_per_tool[x]`` included)."""
    if name.startswith("max_tool_calls_per_tool[") and name.endswith("]"):
        return limits.max_tool_calls_per_tool.get(name[len("max_tool_calls_per_tool[") : -1])
    value = getattr(limits, name, None) if name in {f.name for f in fields(limits)} else None
    return value if _is_number(value) else None


def exceeded_message(reading: LimitReading) -> str:
    """What a task's BudgetExceededError says: the limit, what it allows and what was used."""
    return (
        f"budget exceeded: {reading.limit} is {_number(reading.allowed)} and {_number(reading.used)} "
        "is used; the task stopped before the call that would pass it"
    )


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) and not float(value).is_integer() else str(int(value))
