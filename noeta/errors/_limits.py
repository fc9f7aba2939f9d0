"""Errors of a limit reached: attempts, a task's usage budget, an API key's daily quota."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noeta.errors._base import NoetaError


@dataclass(eq=False)
class AttemptsExhaustedError(NoetaError):
    """Every attempt allowed by ``max_retries`` failed.

    ``attempts`` is the number of attempts made (``max_retries + 1`` when the budget ran out),
    ``issues`` one message per failed attempt in order.
    """

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

    def to_details(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "issues": list(self.issues),
            "last_failure_type": self.last_failure_type,
            "last_data": self.last_data,
            "last_raw_text": self.last_raw_text,
        }

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "AttemptsExhaustedError":
        return cls(
            attempts=int(details.get("attempts", 0)),
            issues=list(details.get("issues", [])),
            last_failure_type=details.get("last_failure_type", "provider"),
            last_data=details.get("last_data"),
            last_raw_text=details.get("last_raw_text"),
        )


@dataclass(eq=False)
class BudgetExceededError(NoetaError):
    """A task reached one of its ``UsageLimits`` and stopped before the call that would pass it.

    ``limit`` names the limit (``max_cost_usd``, ``max_tool_calls_per_tool[search]``...),
    ``allowed`` its value and ``used`` the task's total at that moment; ``spend`` holds all the
    task's totals then (``usage``: tokens and cost, ``counts``: model and tool calls), sub-agents
    included.
    """

    limit: str
    allowed: float
    used: float
    spend: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    def __post_init__(self) -> None:
        super().__init__(self.message or f"budget exceeded: {self.limit} is {self.allowed:g}, {self.used:g} used")

    def to_details(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "allowed": self.allowed,
            "used": self.used,
            "spend": self.spend,
            "message": self.message,
        }

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "BudgetExceededError":
        return cls(
            limit=str(details.get("limit", "?")),
            allowed=float(details.get("allowed", 0)),
            used=float(details.get("used", 0)),
            spend=dict(details.get("spend") or {}),
            message=details.get("message") or message,
        )

    @property
    def cost_usd(self) -> float:
        """The task's cost when it stopped."""
        return float(self.spend.get("usage", {}).get("cost_usd", 0.0))


@dataclass(eq=False)
class QuotaExceededError(NoetaError):
    """An API key of ``noeta serve`` has spent its daily quota; the request was refused and
    nothing was started (HTTP 429). The quota renews at midnight UTC."""

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

    def to_details(self) -> dict[str, Any]:
        return {
            "quota": self.quota,
            "key_id": self.key_id,
            "allowed_usd": self.allowed_usd,
            "spent_usd": self.spent_usd,
            "day": self.day,
        }

    @classmethod
    def from_details(cls, message: str, details: dict[str, Any]) -> "QuotaExceededError":
        return cls(
            quota=str(details.get("quota", "daily_usd")),
            key_id=str(details.get("key_id", "?")),
            allowed_usd=float(details.get("allowed_usd", 0)),
            spent_usd=float(details.get("spent_usd", 0)),
            day=str(details.get("day", "")),
        )
