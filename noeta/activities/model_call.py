"""``call_model``: rebuild the transcript from the content store, call the provider (streaming when
someone listens), store the extended transcript and price the call.

:class:`ModelCalls` serves it from the worker's shared services; it owns what only model calls use:
the cache of small stored bodies, the per-provider limiters, the delta broker and the tool shapes
that ``prepare_task`` stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable
from typing import Any

from pydantic import TypeAdapter
from temporalio import activity

from noeta.activities._attempts import AttemptLedger, as_details
from noeta.activities._errors import to_application_error
from noeta.activities._heartbeat import AttemptTimedOut, attempt_seconds, with_heartbeat
from noeta.activities._services import PREVIEW_CHARS, WorkerServices, call_maybe_async
from noeta.activities._store_writes import read_stored, stored
from noeta.activities._streaming import stream_call, streams
from noeta.context.blob_cache import BlobCache
from noeta.context.compaction import compacted, load_view
from noeta.context.requests import model_request, offered_tools
from noeta.context.transcript import has_refs
from noeta.deltas.broker import DeltaSettings
from noeta.errors import ProviderError, ProviderNotRegisteredError
from noeta.providers.pricing import model_of
from noeta.protocols.activity_io import CallModelInput, CallModelOutput
from noeta.protocols.messages import (
    ContentRef,
    LLMRequest,
    LLMResponse,
    Message,
    TextBlock,
    provider_system,
)
from noeta.protocols.names import CALL_MODEL
from noeta.providers.errors import classify_exception
from noeta.providers.limits import MAX_QUEUE_SECONDS, Limiter, ProviderLimit, ProviderLimitSettings
from noeta.providers.rate_windows import rate_windows
from noeta.telemetry import instrument

_MODEL_OUTPUT = TypeAdapter(CallModelOutput)
logger = logging.getLogger(__name__)

#: A model answer's text block larger than this goes to the content store like a large tool output
#: (Temporal refuses payloads over 2 MiB; the transcript keeps the whole text).
INLINE_ANSWER_LIMIT = 256 * 1024
#: Lists of stored tool shapes kept in memory before the cache starts over.
_REMOTE_SCHEMA_LISTS = 256


class _NotInMemory(Exception):
    """Building a request needs the content store: it is built on an I/O thread instead."""


class ModelCalls:
    """``call_model`` and what it needs: request building, provider limits, streaming, recording."""

    def __init__(self, services: WorkerServices) -> None:
        """``services``: the worker's shared services (registry, content store, threads); the
        provider limits and the delta broker come from its registry."""
        self.services = services
        self.registry = services.registry
        self.blobs = BlobCache(services.store)
        # Every provider gets one: unlimited ones still honour the pauses their answers ask for.
        self.rate_windows = rate_windows(self.registry.rate_limits)
        self.env_limits = ProviderLimitSettings().limits  # NOETA_PROVIDER_LIMITS: a bad one stops the worker here
        self.limiters: dict[str, Limiter] = {}
        deltas = DeltaSettings()
        self.delta_broker = self.registry.delta_broker or deltas.broker()
        self.workflow_stream = deltas.workflow_stream
        self.first_batch_seconds = deltas.first_batch_seconds
        self._remote_schema_lists: dict[str, dict[str, dict[str, Any]]] = {}  # by content hash

    async def aclose(self) -> None:
        """Close the connections to shared rate-limit counts this worker opened (counts passed in
        as an object are the caller's to close)."""
        if self.registry.rate_limits is None or isinstance(self.registry.rate_limits, str):
            await self.rate_windows.aclose()

    @activity.defn(name=CALL_MODEL)
    async def call_model(self, inp: CallModelInput) -> CallModelOutput:
        """Call the task's provider with the stored transcript plus ``inp.append`` and record the
        answer: the extended transcript, the raw response, the priced usage."""
        provider = self.registry.providers.get(inp.provider)
        if provider is None:
            known = ", ".join(sorted(self.registry.providers)) or "none"
            raise to_application_error(
                ProviderNotRegisteredError(
                    f"provider {inp.provider!r} is not registered on this worker (it has: {known})"
                )
            )
        ledger = AttemptLedger(inp.budget)
        recorded = await self.services.steps.earlier(inp.step_key, ledger, _MODEL_OUTPUT, may_have_run=inp.may_have_run)
        if recorded is not None:
            return recorded
        ledger.check_lost()
        seconds = attempt_seconds()
        # The provider's own timeout is the whole attempt: the worker's deadline (just before it)
        # cuts first and records the timeout, whatever timeout the adapter was built with.
        timeout = activity.info().start_to_close_timeout
        seconds_left = timeout.total_seconds() if timeout else None
        try:  # the usual step: building it here costs less than a trip to an I/O thread
            request = self._build_request(inp, seconds_left, memory_only=True)
        except _NotInMemory:  # a worker new to the task, a stored output or image in the transcript
            request = await read_stored(ledger, self.services.io(self._build_request, inp, seconds_left))
        system = provider_system(provider)
        with instrument.model_call(
            system, request, inp.task_id, f"turn-{inp.turn}", registered_as=inp.provider, endpoint=getattr(provider, "base_url", None)
        ) as observed:
            try:
                work = self._limited(inp.provider, provider, request, inp)
                response = await with_heartbeat(work, as_details(ledger.earlier), seconds=seconds)
                if not isinstance(response, LLMResponse):
                    raise TypeError(f"complete() returned {type(response).__name__}, not LLMResponse")
            except asyncio.CancelledError:
                raise
            except AttemptTimedOut as exc:
                message = f"no answer within {exc.seconds:g} s (model_timeout_seconds)"
                raise ledger.failed(ProviderError(provider=inp.provider, message=message, retryable=True)) from None
            except Exception as exc:
                raise ledger.failed(classify_exception(inp.provider, exc)) from exc
            observed.finished(response, reported_model(response.raw))
        assistant = Message(role="assistant", content=list(response.content))

        async def write() -> CallModelOutput:
            recorded: CallModelOutput = await self.services.io(
                self._record_response, inp, assistant, response, provider, ledger
            )
            return recorded

        # A store that cannot take the answer does not call the provider again: only the write is
        # retried (noeta.activities._store_writes); an attempt out of time asks the model again.
        output = await stored(ledger, write, hold=lambda: None)
        instrument.model_cost(system, output.model or request.model or "default", output.response.usage.cost_usd)
        return output

    async def _limited(self, name: str, provider: Any, request: LLMRequest, inp: CallModelInput) -> Any:
        """The provider call, inside the provider's limit (if it has one) and the pauses it asked for."""
        async with self._slot(name, request):
            return await self._complete(provider, request, inp)

    async def complete_limited(self, name: str, provider: Any, request: LLMRequest) -> Any:
        """A call of provider ``name`` that is not a task's turn (a compaction's summary): inside the
        same limit and pauses as the task's own calls, never streamed."""
        async with self._slot(name, request):
            return await call_maybe_async(provider.complete, request, pool=self.services.io_pool, label=f"{name}.complete")

    def _slot(self, name: str, request: LLMRequest) -> Any:
        """A place in provider ``name``'s limiter (made on first use), queueing at most a quarter of
        the call's time."""
        limiter = self.limiters.get(name)
        if limiter is None:
            limit = self.registry.provider_limits.get(name) or self.env_limits.get(name) or ProviderLimit()
            limiter = self.limiters[name] = Limiter(name, limit, self.rate_windows)
        queue = min(MAX_QUEUE_SECONDS, (request.timeout_seconds or MAX_QUEUE_SECONDS * 4) / 4)
        return limiter.slot(queue)

    def _record_response(
        self, inp: CallModelInput, assistant: Message, response: LLMResponse, provider: Any, ledger: AttemptLedger
    ) -> CallModelOutput:
        """Store the extended transcript and the provider's raw response, price the call and record
        the step (one trip to the I/O pool: the price catalogue loads on first use); large answer
        text goes to history as a preview and a reference."""
        store = self.services.store
        raw_ref = store.put(json.dumps(response.raw, default=str).encode(), "application/json") if response.raw else None
        head = self.services.transcripts.append(inp.head, [*inp.append, assistant])
        price = self.services.prices.price(response.usage, model_of(inp.model, provider), provider)
        usage = response.usage if price is None else dataclasses.replace(response.usage, cost_usd=price.usd)
        output = CallModelOutput(
            response=LLMResponse(
                stop_reason=response.stop_reason, content=self._inline_blocks(response.content), usage=usage
            ),
            head=head,
            raw_ref=raw_ref,
            attempt=ledger.attempt,
            retried=ledger.earlier,
            priced_as=price.source if price is not None else None,
            # NoetaModel of a task that named none: the provider's default, else what it reported.
            model=model_of(inp.model, provider) or reported_model(response.raw),
        )
        self.services.steps.record(inp.step_key, _MODEL_OUTPUT, output)
        return output

    def _inline_blocks(self, content: list[Any]) -> list[Any]:
        """Text blocks over INLINE_ANSWER_LIMIT as a preview naming the stored whole (the stored
        transcript, and so the model, keep the full text)."""
        out = []
        for block in content:
            if isinstance(block, TextBlock) and len(block.text) * 4 > INLINE_ANSWER_LIMIT:
                data = block.text.encode()
                if len(data) > INLINE_ANSWER_LIMIT:
                    ref = self.services.store.put(data)
                    block = TextBlock(
                        text=block.text[:PREVIEW_CHARS] + f"… [answer of {len(data)} bytes in content store {ref.hash}]"
                    )
            out.append(block)
        return out

    def request_for(self, inp: CallModelInput) -> LLMRequest:
        """The provider request ``call_model`` would send for ``inp``, read from the content store
        (on an I/O thread): a compaction asks its summary on this request's prefix."""
        return self._build_request(inp)

    def _build_request(
        self, inp: CallModelInput, timeout_seconds: float | None = None, *, memory_only: bool = False
    ) -> LLMRequest:
        """The provider request for ``inp``. ``memory_only``: from what this worker holds in memory,
        raising :class:`_NotInMemory` rather than reading the content store (so it may run on the
        event loop)."""
        transcripts = self.services.transcripts
        # A compacted task's model sees its stored view instead of the transcript's beginning.
        view = load_view(self._body(inp.context.view, memory_only)) if inp.context is not None else None
        if memory_only:
            loaded = transcripts.in_memory(inp.head)
            if loaded is None or any(has_refs(m) for m in (*inp.append, *(view or ()))):
                raise _NotInMemory
            transcript = loaded + tuple(inp.append)  # nothing in it for resolve() to read
        else:
            transcript = transcripts.load(inp.head) + tuple(inp.append)
        if view is not None:
            transcript = tuple(compacted(view, inp.context.folded if inp.context else 0, transcript))
        # Tools not in this worker's registry: remote MCP servers' and the declared sub-agents'.
        remote_tools = {
            **self._remote_schemas(inp.agents_ref, memory_only), **self._remote_schemas(inp.mcp_tools_ref, memory_only)
        }
        registry = self.registry
        tools = offered_tools(inp.tools, lambda n: registry.tool_spec(n) if n in registry.tools else None, remote_tools)
        volatile = self._body(inp.volatile_ref, memory_only).decode() if inp.volatile_ref else ""
        # From memory, nothing in the transcript refers to a stored body: there is nothing to resolve.
        resolved = transcript if memory_only else transcripts.resolve(transcript)
        return model_request(
            inp,
            resolved,
            tools=tools,
            system=self._body(inp.system_ref, memory_only).decode() if inp.system_ref else None,
            volatile=volatile,
            output_schema=json.loads(self._body(inp.output_schema_ref, memory_only)) if inp.output_schema_ref else None,
            timeout_seconds=timeout_seconds,
        )

    def _body(self, ref: ContentRef, memory_only: bool) -> bytes:
        """A small stored body every call of a task reads (system prompt, schema, volatile context)."""
        if not memory_only:
            return self.blobs.get(ref)
        body = self.blobs.cached(ref)
        if body is None:
            raise _NotInMemory
        return body

    def _remote_schemas(self, ref: ContentRef | None, memory_only: bool = False) -> dict[str, dict[str, Any]]:
        """Tool shapes prepare stored (MCP tools, sub-agents) by name (read once per list, then kept)."""
        if ref is None:
            return {}
        cached = self._remote_schema_lists.get(ref.hash)
        if cached is None:
            if memory_only:
                raise _NotInMemory
            cached = {t["name"]: t for t in json.loads(self.services.store.get(ref))}
            if len(self._remote_schema_lists) > _REMOTE_SCHEMA_LISTS:
                self._remote_schema_lists.clear()
            self._remote_schema_lists[ref.hash] = cached
        return cached

    def _complete(self, provider: Any, request: LLMRequest, inp: CallModelInput) -> Awaitable[Any]:
        """Stream when the provider can and someone may take the pieces (the task's workflow
        stream, this worker's sink, the delta broker: noeta.activities._streaming); else a plain
        completion."""
        sink, broker = self.registry.delta_sink, self.delta_broker
        # A local call (model_local_activity) runs inside the workflow task its batches would have
        # to wait for: its pieces go to the sink and the broker only (noeta.protocols.local_model_calls).
        workflow_stream = self.workflow_stream and not activity.info().is_local
        if not streams(provider, sink, broker, workflow_stream):
            # Synchronous providers share the I/O pool: a hung tool must not hold up model calls.
            return call_maybe_async(
                provider.complete, request, pool=self.services.io_pool, label=f"{inp.provider}.complete"
            )
        return stream_call(
            provider, request, inp.task_id, inp.turn, sink, broker, workflow_stream, self.first_batch_seconds
        )


def reported_model(raw: Any) -> str | None:
    """The ``model`` a provider's raw response names (OpenAI- and Anthropic-shaped ones do)."""
    model = raw.get("model") if isinstance(raw, dict) else None
    return model if isinstance(model, str) and model else None
