"""``compact_context``: make what a task's model sees smaller, by the strategy the task chose
(noeta.protocols.compaction), without touching the stored transcript.

The workflow decides when (noeta.workflows.compaction); this activity reads the transcript, plans
which turns to fold (noeta.context.compaction), writes the summary (a model call of its own) or
the previews, stores the new view and returns its reference with the token counts.

A summary is written once per folded range: it is recorded under the step's key as soon as the
provider returns it, before anything else can fail, so a retried attempt (a worker killed, a store
that refused the view) reuses it instead of asking the model again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from temporalio import activity

from noeta.activities._attempts import AttemptLedger, as_details
from noeta.activities._errors import to_application_error
from noeta.activities._heartbeat import AttemptTimedOut, attempt_seconds, with_heartbeat
from noeta.activities._services import WorkerServices
from noeta.activities._store_writes import read_stored
from noeta.activities.model_call import ModelCalls
from noeta.context import compaction as plan
from noeta.context import summary_request
from noeta.errors import ConfigurationError, ContextLengthError, ProviderError, ProviderNotRegisteredError
from noeta.protocols.activity_io import CompactContextInput, CompactContextOutput, CompactedContext
from noeta.protocols.context_window import estimate_tokens
from noeta.protocols.messages import ContentRef, LLMRequest, Message, Usage
from noeta.protocols.names import COMPACT_CONTEXT
from noeta.providers.errors import classify_exception
from noeta.providers.pricing import model_of

_OUTPUT = TypeAdapter(CompactContextOutput)
#: Tokens of a summarizing request left for its instruction and the chat template.
SUMMARY_REQUEST_MARGIN = 256


@dataclass(frozen=True, slots=True)
class WrittenSummary:
    """A summary as the provider returned it, recorded under ``{step_key}/summary``."""

    text: str
    usage: Usage


_SUMMARY = TypeAdapter(WrittenSummary)


@dataclass(frozen=True)
class _Read:
    transcript: list[Message]
    """The whole transcript (stored head plus the messages added since), bodies unresolved."""
    view: list[Message] | None
    """The current view (None: not compacted yet)."""


def scaled(estimate_after: int, tokens_before: int, estimate_before: int) -> int:
    """The count after a compaction: its estimate, scaled by how the workflow's count before (the
    provider's reported size plus estimates) compares with the estimate before (within 0.5-2)."""
    if tokens_before <= 0 or estimate_before <= 0:
        return estimate_after
    ratio = min(2.0, max(0.5, tokens_before / estimate_before))
    return round(estimate_after * ratio)


class Compactions:
    """``compact_context`` and what it needs: the worker's services (store, transcripts, registry)."""

    def __init__(self, services: WorkerServices, model_calls: ModelCalls) -> None:
        """``services``: the worker's shared services; ``model_calls``: the worker's model calls,
        whose provider limits a summarizing call waits in like any other."""
        self.services = services
        self.model_calls = model_calls

    @activity.defn(name=COMPACT_CONTEXT)
    async def compact_context(self, inp: CompactContextInput) -> CompactContextOutput:
        """Fold the oldest turns of the task's context by ``inp.strategy``; returns the new view
        (None when nothing could be folded) and the tokens before and after."""
        ledger = AttemptLedger(inp.budget)
        recorded = await self.services.steps.earlier(inp.step_key, ledger, _OUTPUT)
        if recorded is not None:
            return recorded
        ledger.check_lost()
        read: _Read = await read_stored(ledger, self.services.io(self._read, inp))
        transcript, old_view = read.transcript, read.view
        folded = inp.context.folded if inp.context is not None else 0
        before = plan.compacted(old_view, folded, transcript)
        if inp.strategy == "function":
            view, new_folded = await self._by_function(inp, before), len(transcript)
            summary = None
        else:
            keep = inp.keep_tokens if inp.reason == "threshold" else inp.keep_tokens // 2
            new_folded = plan.fold_point(transcript, folded, keep)
            if plan.turns_in(transcript[folded:new_folded]) == 0:  # the turns fit the keep: fold the oldest
                later = plan.turn_starts(transcript, new_folded + 1)
                new_folded = later[0] if later else folded
            if new_folded <= folded:  # one turn is all there is: nothing to fold
                return CompactContextOutput(None, inp.strategy, inp.tokens_before, inp.tokens_before, attempt=ledger.attempt, retried=ledger.earlier)
            prefix = plan.stable_prefix(transcript)
            old_part = (old_view or prefix)[len(prefix):]
            newly = transcript[max(folded, len(prefix)):new_folded]
            folding = [*old_part, *newly]
            if inp.strategy == "summarize":
                # The task's request messages up to the fold: all but the kept transcript's.
                cut = len(before) - (len(transcript) - new_folded)
                summary = await self._summary(inp, ledger, folding, cut)
                view = [*prefix, plan.summary_message(summary.text)]
            else:
                summary = None
                view = await self.services.io(self._previews, inp, prefix, old_part, newly, transcript[new_folded:])
        after = plan.compacted(view, new_folded, transcript)
        tokens_after = scaled(estimate_tokens(after), inp.tokens_before, estimate_tokens(before))

        def store_and_record() -> CompactContextOutput:
            store = self.services.store
            summary_ref = store.put(summary.text.encode(), "text/plain") if summary is not None else None
            output = CompactContextOutput(
                context=CompactedContext(folded=new_folded, view=store.put(plan.dump_view(view), plan.VIEW_MEDIA_TYPE)),
                strategy=inp.strategy,
                tokens_before=inp.tokens_before,
                tokens_after=tokens_after,
                turns_folded=plan.turns_in(transcript[folded:new_folded]),
                messages_folded=new_folded - folded,
                summary=summary.text if summary is not None else None,
                summary_ref=summary_ref,
                usage=self._priced(inp, summary.usage) if summary is not None else Usage(),
                attempt=ledger.attempt,
                retried=ledger.earlier,
            )
            self.services.steps.record(inp.step_key, _OUTPUT, output)
            return output

        out: CompactContextOutput = await self.services.io(store_and_record)
        return out

    def _priced(self, inp: CompactContextInput, usage: Usage) -> Usage:
        """The summarizing call's usage with its cost, priced like any model call of the task."""
        provider = self.services.registry.providers.get(inp.provider)
        price = self.services.prices.price(usage, model_of(inp.model, provider), provider)
        return usage if price is None else dataclasses.replace(usage, cost_usd=price.usd)

    def _read(self, inp: CompactContextInput) -> _Read:
        transcript = [*self.services.transcripts.load(inp.head), *inp.append]
        view = plan.load_view(self.services.store.get(inp.context.view)) if inp.context is not None else None
        return _Read(transcript, view)

    def _previews(
        self,
        inp: CompactContextInput,
        prefix: list[Message],
        previewed_before: list[Message],
        newly: Sequence[Message],
        kept: Sequence[Message],
    ) -> list[Message]:
        """The folded turns with their tool outputs cut to previews (a stored output's start is read
        for it; runs on an I/O thread); while the whole is still over the target, the oldest of
        them are left out (with a note saying how many)."""
        def read(ref: ContentRef) -> str:  # the start of a stored output, for its preview
            return self.services.store.get(ref)[: inp.preview_chars * 4].decode("utf-8", "replace")

        # What an earlier compaction previewed stays as it is (its notes name the stored wholes).
        previewed = [*previewed_before, *(plan.preview(m, inp.preview_chars, read) for m in newly)]
        budget = int(inp.target_tokens * 0.8) - estimate_tokens(prefix) - estimate_tokens(kept)
        dropped = 0
        while previewed and estimate_tokens(previewed) > budget:
            # Whole turns go: up to (not including) the next assistant message after the first.
            nxt = next((i for i in range(1, len(previewed)) if previewed[i].role == "assistant"), len(previewed))
            dropped += sum(plan.left_out(m) for m in previewed[:nxt]) + plan.turns_in(previewed[:nxt])
            previewed = previewed[nxt:]
        note = [plan.left_out_note(dropped)] if dropped else []
        return [*prefix, *note, *previewed]

    async def _summary(self, inp: CompactContextInput, ledger: AttemptLedger, folding: list[Message], cut: int) -> WrittenSummary:
        """The summary of ``folding`` (the first ``cut`` messages of the task's request): recorded
        by an earlier attempt of this step, else written by the task's provider and recorded at once."""
        key = f"{inp.step_key}/summary"
        if ledger.attempt > 1 and inp.step_key:
            kept = await read_stored(ledger, self.services.io(self.services.steps.recorded, key, _SUMMARY))
            if kept is not None:
                return kept  # type: ignore[no-any-return]
        provider = self.services.registry.providers.get(inp.provider)
        if provider is None:
            known = ", ".join(sorted(self.services.registry.providers)) or "none"
            raise to_application_error(
                ProviderNotRegisteredError(f"provider {inp.provider!r} is not registered on this worker (it has: {known})")
            )
        metadata = {"task_id": inp.task_id, "purpose": "compaction", "step_key": inp.step_key}
        room = (inp.window_tokens or inp.target_tokens) - inp.summary_max_tokens - SUMMARY_REQUEST_MARGIN
        ordinary = None
        if inp.call is not None:  # the task's next request, as call_model would build it
            call = dataclasses.replace(inp.call, head=inp.head, append=inp.append, context=inp.context)
            ordinary = await read_stored(ledger, self.services.io(self.model_calls.request_for, call))
            cached = summary_request.on_prefix(ordinary, cut, inp.summary_max_tokens, metadata)
            if summary_request.fits(cached, ordinary, inp.tokens_before, room):
                try:
                    return await self._written(inp, ledger, provider, cached, folding, refusable=True)
                except ContextLengthError:
                    pass  # refused as too long all the same: the folded turns as text, cut to fit
        resolved = await read_stored(ledger, self.services.io(self.services.transcripts.resolve, folding))
        text_room = inp.target_tokens - inp.summary_max_tokens - SUMMARY_REQUEST_MARGIN
        if ordinary is not None:  # the task's system prompt and tools come first
            text_room -= summary_request.request_tokens(summary_request.as_text("", None, 0, metadata, ordinary))
        text = plan.fit_text(plan.render(resolved), max(256, text_room))
        request = summary_request.as_text(text, inp.model, inp.summary_max_tokens, metadata, ordinary)
        return await self._written(inp, ledger, provider, request, folding)

    async def _written(
        self,
        inp: CompactContextInput,
        ledger: AttemptLedger,
        provider: Any,
        request: LLMRequest,
        folding: list[Message],
        refusable: bool = False,
    ) -> WrittenSummary:
        """The summary ``provider`` writes for ``request``, recorded under the step's key at once.
        ``refusable``: a ContextLengthError is raised as it is (the caller asks again otherwise)."""
        try:
            work = self.model_calls.complete_limited(inp.provider, provider, request)
            response = await with_heartbeat(work, as_details(ledger.earlier), seconds=attempt_seconds())
        except AttemptTimedOut as exc:
            message = f"the summarizing call got no answer within {exc.seconds:g} s"
            raise ledger.failed(ProviderError(provider=inp.provider, message=message, retryable=True)) from None
        except Exception as exc:
            err = classify_exception(inp.provider, exc)
            if refusable and isinstance(err, ContextLengthError):
                raise err from exc
            raise ledger.failed(err) from exc
        text = getattr(response, "text", "")
        if not isinstance(text, str):
            raise ledger.failed(ProviderError(provider=inp.provider, message="the summarizing call returned no response", retryable=True))
        # A model that writes nothing (a small one can) gets a note in place of its summary: asked
        # again it would write the same nothing, and the turns must be folded all the same.
        text = text.strip() or f"[{plan.turns_in(folding)} earlier turn(s) were compacted; the model wrote no summary of them]"
        written = WrittenSummary(text, dataclasses.replace(response.usage, cost_usd=0.0))
        await self.services.io(self.services.steps.record, f"{inp.step_key}/summary", _SUMMARY, written)
        return written

    async def _by_function(self, inp: CompactContextInput, messages: list[Message]) -> list[Message]:
        """The view a registered compactor makes of what the model sees now."""
        compactor = self.services.registry.compactors.get(inp.function or "")
        if compactor is None:
            known = ", ".join(sorted(self.services.registry.compactors)) or "none"
            err = ConfigurationError(f"compactor {inp.function!r} is not registered on this worker (it has: {known})")
            raise to_application_error(err)
        result = await self.services.user_code(compactor, list(messages), label=f"compactor {inp.function}")
        if not isinstance(result, list) or not all(isinstance(m, Message) for m in result):
            err = ConfigurationError(f"compactor {inp.function!r} must return a list of Message, got {type(result).__name__}")
            raise to_application_error(err)
        return result


__all__ = ["Compactions", "WrittenSummary"]
