"""A task's usage limits, enforced by the workflow before every model call, tool round and
subtask; warnings recorded once per limit; sub-agents get what is left and give back what they used.

Only tasks with limits reach this module's commands (the warning memo, behind PATCH_BUDGETS):
tasks without limits pay nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from noeta.errors import BudgetExceededError
from noeta.protocols.budget import (
    CallCounts,
    LimitReading,
    Spend,
    UsageLimits,
    exceeded_message,
    first_exceeded,
    limit_value,
    readings,
    remaining,
)
from noeta.protocols.names import BUDGET_WARNING_MEMO_KEY, PATCH_BUDGETS
from noeta.protocols.task import BudgetWarningRecord, Carry
from noeta.workflows import patches


def spend_of(state: Carry) -> Spend:
    """The task's spend so far, from its Carry."""
    return Spend(state.usage, state.counts)


def budget_error(reading: LimitReading, spend: Spend) -> ApplicationError:
    """The non-retryable BudgetExceededError that fails the task at ``reading``, with its spend."""
    error = BudgetExceededError(
        limit=reading.limit,
        allowed=reading.allowed,
        used=reading.used,
        spend=spend.to_details(),
        message=exceeded_message(reading),
    )
    return ApplicationError(str(error), error.to_details(), type=BudgetExceededError.__name__, non_retryable=True)


def with_spend(err: ApplicationError, spend: Spend) -> ApplicationError:
    """``err`` with the task's spend in its details, so a parent can add a failed sub-agent's spend
    to its own (a BudgetExceededError carries it already)."""
    details = err.details[0] if err.details else {"message": err.message}
    if not isinstance(details, dict) or err.type == BudgetExceededError.__name__:
        return err
    # A sub-agent's error raised again here carries the sub-agent's spend: this task's replaces it.
    return ApplicationError(err.message, {**details, "spend": spend.to_details()}, type=err.type, non_retryable=True)


class Budget:
    """The limits of one task and the checks made against its Carry (usage, counts, goal start)."""

    def __init__(self, limits: UsageLimits, state: Carry) -> None:
        """``limits``: the task's limits; ``state``: the Carry its spend and goal start are read
        from."""
        self.limits = limits
        self.state = state

    def goal_started(self) -> None:
        """Note that a goal starts now (for ``max_goal_seconds``)."""
        self.state.goal_started = workflow.now().timestamp()

    def goal_seconds(self) -> float:
        """Seconds since the running goal started (0 before any)."""
        started = self.state.goal_started
        return 0.0 if started is None else max(0.0, workflow.now().timestamp() - started)

    def check(self, *, model_calls: int = 0, tools: list[str] | None = None) -> None:
        """Raise BudgetExceededError when the next step (``model_calls`` model calls, the
        ``tools`` calls, or a step of unknown size) would pass a limit."""
        spend = spend_of(self.state)
        reading = first_exceeded(self.limits, spend, self.goal_seconds(), model_calls=model_calls, tools=tools)
        if reading is not None:
            raise budget_error(reading, spend)

    def max_tokens(self, requested: int | None) -> int | None:
        """A call's ``max_tokens``, lowered to the output tokens left (the check made sure some are)."""
        left = [
            r.allowed - r.used
            for r in readings(self.limits, spend_of(self.state), 0.0)
            if r.limit in ("max_output_tokens", "max_total_tokens")
        ]
        if not left:
            return requested
        cap = max(1, int(min(left)))
        return cap if requested is None else min(requested, cap)

    def warn(self) -> None:
        """Record a BudgetWarning for each limit that has reached the warning fraction (once each)."""
        fraction = self.limits.warn_at
        if fraction is None:
            return
        warned = self.state.budget_warned
        new = [
            r for r in readings(self.limits, spend_of(self.state), self.goal_seconds())
            if r.limit not in warned and r.allowed > 0 and r.used >= fraction * r.allowed
        ]
        if not new or not patches.patched(PATCH_BUDGETS):
            return
        warned.extend(r.limit for r in new)
        workflow.upsert_memo(
            {BUDGET_WARNING_MEMO_KEY: [BudgetWarningRecord(r.limit, r.allowed, r.used) for r in new]}
        )

    def left(self) -> UsageLimits:
        """What is left of this task's limits now: what a sub-agent may use (within its own)."""
        return remaining(self.limits, spend_of(self.state), self.goal_seconds())

    def add_child_failure(self, details: Any, given: UsageLimits) -> None:
        """Add the spend a failed sub-agent reported. A sub-agent stopped by what this task gave it
        (``given``: what was left when it started) stops this task too; one stopped by a tighter
        limit of its own has just failed, like any sub-agent call."""
        if not add_failed_spend(self.state, details):
            return
        limit = details.get("limit")
        if not isinstance(limit, str):
            return
        ours = limit_value(given, limit)
        theirs = details.get("allowed")
        if ours is not None and isinstance(theirs, (int, float)) and theirs >= ours - 1e-9:
            self.raise_exceeded(limit)

    def raise_exceeded(self, limit: str) -> NoReturn:
        """Raise the BudgetExceededError of ``limit`` with the task's spend."""
        spend = spend_of(self.state)
        for reading in readings(self.limits, spend, self.goal_seconds()):
            if reading.limit == limit:
                raise budget_error(reading, spend)
        raise budget_error(LimitReading(limit, 0, 0), spend)


def add_failed_spend(state: Carry, details: Any) -> bool:
    """Add the spend a failed sub-agent put in its failure's details, if it did."""
    spend = Spend.from_details(details.get("spend")) if isinstance(details, dict) else None
    if spend is None:
        return False
    state.usage = state.usage + spend.usage
    state.counts = state.counts + spend.counts
    return True


def count_model_call(state: Carry) -> None:
    """Count one more model call in the task's Carry."""
    state.counts = dataclasses.replace(state.counts, model_calls=state.counts.model_calls + 1)


def count_tool_calls(state: Carry, names: list[str]) -> None:
    """Count one more call of each tool in ``names`` in the task's Carry."""
    state.counts = state.counts.with_tools(names)


__all__ = [
    "Budget", "CallCounts", "add_failed_spend", "budget_error", "count_model_call", "count_tool_calls", "spend_of",
    "with_spend",
]
