"""Provider fallback, the workflow's side: make each model call on the task's current provider, and
when it fails in a way another provider may not share (noeta.protocols.fallback.falls_back), record
the switch and make it again on the next of ``fallback_providers``, which the task keeps for the
rest of its calls (the Carry holds which one, across continue-as-new).

``patches.patched(PATCH_PROVIDER_FALLBACK)`` is asked only when a switch is about to be recorded: a
task without fallback providers, or whose provider never fails, issues the same commands as before.
A ContextLengthError reaches this module after compaction had its try (noeta.workflows.compaction);
it moves to the next provider whose model has a larger known window.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from noeta.errors import ContextLengthError
from noeta.protocols.activity_io import CallModelInput, CallModelOutput
from noeta.protocols.context_window import context_window
from noeta.protocols.events_calls import ProviderFallback as ProviderFallbackEvent
from noeta.protocols.fallback import ProviderChoice, add_usage, current_choice, falls_back
from noeta.protocols.names import PATCH_PROVIDER_FALLBACK, PROVIDER_FALLBACK_MEMO_KEY
from noeta.workflows import patches
from noeta.workflows.run import RunState


class ProviderFallback:
    """Moves a run's model calls to the task's next fallback provider when the current one fails
    them (``Options.fallback_providers``), and counts each provider's usage."""

    def __init__(self, run: RunState) -> None:
        """Switches the provider of ``run`` (its Carry's ``provider_index``)."""
        self._run = run

    def current(self) -> ProviderChoice:
        """The provider and model the task's model calls go to now."""
        task = self._run.task
        return current_choice(task.provider, task.model, task.fallback_providers, self._run.state.provider_index)

    async def call(
        self, request: CallModelInput, call: Callable[[CallModelInput], Awaitable[CallModelOutput]]
    ) -> CallModelOutput:
        """``call(request)`` on the current provider; on a failure another provider may not share,
        the same request on the next one (each switch recorded), until one answers or none is left."""
        moved = 0
        while True:
            choice = self.current()
            attempt = dataclasses.replace(request, provider=choice.provider, model=choice.model)
            if moved:  # a call of its own on the new provider, recorded under a key of its own
                attempt = dataclasses.replace(attempt, step_key=f"{request.step_key}/fallback-{moved}")
            try:
                out = await call(attempt)
            except ApplicationError as err:
                if not self._switch(err, request.turn):
                    raise
                moved += 1
                continue
            self._count(choice, out)
            return out

    def _switch(self, err: ApplicationError, turn: int) -> bool:
        """Move to the next provider that may serve the failed call, recording why; False when
        there is none (or the failure is one every provider would share)."""
        task, state = self._run.task, self._run.state
        details = err.details[0] if err.details else None
        if not task.fallback_providers or not falls_back(err.type, details):
            return False
        target = self._next(state.provider_index, err.type == ContextLengthError.__name__)
        if target is None or not patches.patched(PATCH_PROVIDER_FALLBACK):
            return False
        before, after = self.current(), task.fallback_providers[target - 1]
        workflow.upsert_memo({
            PROVIDER_FALLBACK_MEMO_KEY: ProviderFallbackEvent(
                before.provider, before.model, after.provider, after.model, err.type or "", err.message, turn
            )
        })
        state.provider_index = target
        state.model = after.model  # NoetaModel follows the provider that answers (its default: once reported)
        return True

    def _next(self, index: int, longer_window: bool) -> int | None:
        """The index of the provider after ``index`` to move to (None: none left). For a request
        too long for the current model, the first whose model has a larger known window (one whose
        window is not known is tried)."""
        task = self._run.task
        current = self.current()
        have = context_window(current.model or self._run.state.model, task.context_window_tokens) if longer_window else None
        for candidate in range(index + 1, len(task.fallback_providers) + 1):
            if have is None:
                return candidate
            window = context_window(task.fallback_providers[candidate - 1].model)
            if window is None or window > have:
                return candidate
        return None

    def _count(self, choice: ProviderChoice, out: CallModelOutput) -> None:
        """Add the call's usage to its provider's (tasks with fallback providers only: others keep
        one total, and their history is unchanged)."""
        state = self._run.state
        if self._run.task.fallback_providers:
            state.usage_by_provider = add_usage(state.usage_by_provider, choice.provider, choice.model, out.response.usage)
