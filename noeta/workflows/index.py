"""The task's search attributes (status, turns, tokens, resolved model), kept current for the UI and CLI."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

from noeta.protocols.messages import Usage
from noeta.protocols.names import PATCH_LEAN_STEPS
from noeta.protocols.statuses import TaskStatus
from noeta.temporal.search_attributes import COST_USD, MODEL, STATUS, TOKENS_IN, TOKENS_OUT, TURNS
from noeta.workflows import patches


class SearchIndex:
    """Each upsert is a history event and a visibility write: counters alone are refreshed at most
    every ``interval`` seconds (None: never on their own), and with every status change
    (including the final one)."""

    def __init__(self, enabled: bool, cost: bool, interval: float | None) -> None:
        """``enabled``: whether the task is indexed at all; ``cost``: whether NoetaCostUSD is too;
        ``interval``: the least seconds between counter refreshes."""
        self.enabled = enabled
        self.cost = cost
        """Also NoetaCostUSD (registered later than the others: only tasks whose starter saw it)."""
        self.interval = interval
        self._indexed_at: datetime | None = None

    def update(self, turns: int, usage: Usage, status: TaskStatus | None = None, model: str | None = None) -> None:
        """``model``: the model the provider resolved for a task that named none. It only joins an
        upsert that happens anyway; its value comes from a recorded activity result, so replay
        builds the same upsert as the original run."""
        if not self.enabled:
            return
        now = workflow.now()
        if status is None and patches.patched(PATCH_LEAN_STEPS):
            # The client set the initial values when it started the task.
            if self.interval is None:
                return
            since = now - (self._indexed_at or workflow.info().start_time)
            if since.total_seconds() < self.interval:
                return
        self._indexed_at = now
        updates: list[SearchAttributeUpdate[Any]] = [
            TURNS.value_set(turns), TOKENS_IN.value_set(usage.input), TOKENS_OUT.value_set(usage.output)
        ]
        if self.cost and usage.cost_usd:
            updates.append(COST_USD.value_set(usage.cost_usd))
        if status is not None:
            updates.append(STATUS.value_set(status))
        if model:
            updates.append(MODEL.value_set(model))
        workflow.upsert_search_attributes(updates)
