"""The workflow's side of compaction: count the request about to be sent, compact first when it
would pass the threshold of the model's window, and compact once more (then call again) when the
provider still answers that the request is too long. Such a refusal also teaches the task the
model's window (noeta.protocols.window_refusals, behind ``PATCH_LEARNED_WINDOW``): the window
planned with from then on is the one the provider stated, else the refused size, so a window
configured too large is corrected once instead of refused every few turns.

The count is deterministic: the last call's size as its provider reported it (input plus output
tokens, recorded in history) plus an estimate of the messages added since
(noeta.protocols.context_window). A compaction is a ``compact_context`` activity
(noeta.activities.compaction); the view it returns rides on every later model call's input and in
the Carry, so it survives continue-as-new. ``patches.patched(PATCH_COMPACTION)`` is asked only when
a compaction is about to be scheduled: a task that never reaches the threshold records nothing new.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Literal

from temporalio.exceptions import ActivityError, ApplicationError

from noeta.errors import ContextLengthError
from noeta.protocols.activity_io import CallModelInput, CallModelOutput, CompactContextInput, CompactContextOutput
from noeta.protocols.compaction import active, compaction_due
from noeta.protocols.fallback import ProviderChoice, current_choice
from noeta.protocols.context_window import context_window, estimate_message_tokens, estimate_tokens
from noeta.protocols.messages import Message
from noeta.protocols.names import COMPACT_CONTEXT, PATCH_COMPACTION, PATCH_LEARNED_WINDOW
from noeta.protocols.window_refusals import Refusal, window_key
from noeta.workflows import patches, steps
from noeta.workflows.failures import provider_failure, raise_if_cancelled
from noeta.workflows.run import RunState


class ContextKeeper:
    """Keeps a run's model requests within the model's context window (``Options.compaction``)."""

    def __init__(self, run: RunState) -> None:
        """Counts and compacts the requests of ``run``."""
        self._run = run
        self._counted = 0
        """The count of the request being sent (for the reported size's fallback, below)."""

    def window(self) -> int | None:
        """The model's context window in tokens: the configured or catalogued one, or the one a
        refusal taught when that is smaller (None: not known)."""
        task, state = self._run.task, self._run.state
        choice = self._choice()
        known = context_window(choice.model or state.model, task.context_window_tokens)
        learned = state.learned_windows.get(window_key(choice.provider, choice.model))
        if learned is None:
            return known
        return learned if known is None else min(known, learned)

    def _choice(self) -> ProviderChoice:
        """The provider and model the task calls now: its own, or a fallback (noeta.workflows.fallback)."""
        task = self._run.task
        return current_choice(task.provider, task.model, task.fallback_providers, self._run.state.provider_index)

    def count(self) -> int:
        """The tokens of the request about to be sent: the last call's reported size plus the
        estimate of the messages added since."""
        state = self._run.state
        return state.context_tokens + estimate_tokens(state.pending)

    async def fit(self, request: CallModelInput) -> CallModelInput:
        """``request`` with the context its model should see, compacted first when it would pass
        the threshold of the window."""
        settings, window = self._run.task.compaction, self.window()
        self._counted = self.count()
        if compaction_due(self._counted, window, settings):
            await self._compact(request, self._counted, "threshold")
        return self._with_context(request)

    async def call(
        self, request: CallModelInput, call: Callable[[CallModelInput], Awaitable[CallModelOutput]]
    ) -> CallModelOutput:
        """``call(request)``; a ContextLengthError compacts the context and calls once more (a
        second one, or one that nothing could be folded for, is raised as it is). Keeps the call's
        reported size for the next count."""
        try:
            out = await call(request)
        except ApplicationError as err:
            if err.type != ContextLengthError.__name__ or not active(self._run.task.compaction):
                raise
            if not await self._compact(request, self._refused(err), "context_length"):
                raise
            out = await call(self._with_context(request))
        usage = out.response.usage
        reported = usage.input + usage.output
        # A provider that reports no input tokens: count on from the estimate.
        if usage.input == 0:
            reported = self._counted + estimate_message_tokens(Message(role="assistant", content=out.response.content))
        self._run.state.context_tokens = reported
        return out

    def _refused(self, err: ApplicationError) -> int:
        """The size of the request ``err`` refused, and (tasks with PATCH_LEARNED_WINDOW) the window
        it teaches, kept for the provider and model that refused it."""
        if not active(self._run.task.compaction) or not patches.patched(PATCH_LEARNED_WINDOW):
            return max(self._counted, self.window() or 0)  # as histories before the patch recorded it
        refusal = Refusal.of(err.details[0] if err.details else None, self._counted)
        choice = self._choice()
        self._run.state.learned_windows[window_key(choice.provider, choice.model)] = refusal.window(self.window())
        return refusal.size

    def _with_context(self, request: CallModelInput) -> CallModelInput:
        context = self._run.state.context
        return request if context is None or request.context == context else dataclasses.replace(request, context=context)

    async def _compact(self, request: CallModelInput, tokens: int, reason: Literal["threshold", "context_length"]) -> bool:
        """Schedule a compaction (the patch is asked here, only); whether the context changed."""
        task, state = self._run.task, self._run.state
        settings = task.compaction
        if settings is None or not active(settings) or not patches.patched(PATCH_COMPACTION):
            return False
        base = self.window() or tokens  # a model without a known window: the size the provider refused
        inp = CompactContextInput(
            task_id=request.task_id,
            provider=request.provider,
            model=request.model,
            head=state.head,
            append=list(state.pending),
            context=state.context,
            strategy=settings.strategy,
            tokens_before=tokens,
            keep_tokens=int(settings.keep_recent * base),
            target_tokens=int(settings.threshold * base),
            reason=reason,
            function=settings.function,
            summary_max_tokens=settings.summary_max_tokens,
            preview_chars=settings.preview_chars,
            step_key=steps.step_key(f"compact-{state.total_turns}-{reason}"),
            window_tokens=self.window(),
            # The call without its transcript (this input has it): the summary is asked on its prefix.
            call=dataclasses.replace(request, head=None, append=[], context=None, budget=None, step_key=""),
        )
        out = await _compact_context(self._run, inp)
        state.usage = state.usage + out.usage
        if out.context is None:
            return False
        state.context = out.context
        self._counted = out.tokens_after
        return True


async def _compact_context(run: RunState, inp: CompactContextInput) -> CompactContextOutput:
    """The ``compact_context`` activity, on the task's model-call options and provider retries."""
    task = run.task
    options, retries = task.model_activity, steps.provider_retries(task)
    inp = dataclasses.replace(inp, budget=steps.attempt_budget(task, options, retries))
    summary = f"compact context ({inp.strategy}, {inp.reason}) · {inp.tokens_before} tokens"
    try:
        return await steps.execute(
            COMPACT_CONTEXT, inp, CompactContextOutput, summary, options,
            start_to_close=options.start_to_close_seconds or task.model_timeout_seconds,
            retry=steps.retry_policy(options, retries, ledger=True),
            heartbeat=options.heartbeat_seconds,
        )
    except ActivityError as err:
        raise_if_cancelled(err)
        raise provider_failure(err, retries) from err


__all__ = ["ContextKeeper"]
