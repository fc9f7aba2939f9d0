"""Errors of a limit reached: attempts, a task's usage budget, an API key's daily quota."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.errors._base import FieldsError


@dataclass(eq=False)
class AttemptsExhaustedError(FieldsError):
    """Every attempt allowed by ``max_retries`` failed.

    ``attempts`` is the number of attempts made (``max_retries + 1`` when the budget ran out),
    ``issues`` one message per failed attempt in order.
    """

    _detail_defaults = {"attempts": 0}

    attempts: int
    issues: list[str] = field(default_factory=list)
    #: "provider", "schema", "validator" or "rate_limit" (the call waited longer than
    #: ``rate_limit_wait_seconds`` in all): what failed last.
    last_failure_type: str = "provider"
    last_data: Any = None
    last_raw_text: str | None = None

    def __post_init__(self) -> None:
        last = f": {self.issues[-1]}" if self.issues else ""
        super().__init__(f"All attempts exhausted after {self.attempts} attempt(s){last}")



@dataclass(eq=False)
class BudgetExceededError(FieldsError):
    """A task reached one of its ``UsageLimits`` and stopped before the call that would pass it.

    ``limit`` names the limit (``max_cost_usd``, ``max_tool_calls_per_tool[search]``...),
    ``allowed`` its value and ``used`` the task's total at that moment; ``spend`` holds all the
    task's totals then (``usage``: tokens and cost, ``counts``: model and tool calls), sub-agents
    included.
    """

    _detail_defaults = {"limit": "?", "allowed": 0.0, "used": 0.0}

    limit: str
    allowed: float
    used: float
    spend: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    def __post_init__(self) -> None:
        super().__init__(self.message or f"budget exceeded: {self.limit} is {self.allowed:g}, {self.used:g} used")


    @property
    def cost_usd(self) -> float:
        """The task's cost when it stopped."""
        return float(self.spend.get("usage", {}).get("cost_usd", 0.0))


@dataclass(eq=False)
class QuotaExceededError(FieldsError):
    """An API key of ``noeta serve`` has spent its daily quota; the request was refused and
    nothing was started (HTTP 429). The quota renews at midnight UTC."""

    _detail_defaults = {"quota": "daily_usd", "key_id": "?", "allowed_usd": 0.0, "spent_usd": 0.0, "day": ""}

    quota: str
    """Which quota: ``daily_usd``."""
    key_id: str
    """The key's id (a hash prefix, never the key)."""
    allowed_usd: float
    spent_usd: float
    day: str
    """The UTC day the spend is counted for (YYYY-MM-DD)."""

    def __post_init__(self) -> None:
        super().__init__(
            f"API key {self.key_id} has spent ${self.spent_usd:.4f} of its ${self.allowed_usd:.4f} {self.quota} "
            f"quota on {self.day} (UTC); requests that start or continue tasks are refused until the next day"
        )

