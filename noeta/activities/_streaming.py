"""A model call's streamed pieces: to the worker's own sink, to a broker (Redis, in-process), and to
the task's workflow stream (:mod:`noeta.deltas.workflow_stream`), which any client reads through
Temporal. The provider streams whenever it can and one of them may take the pieces; a sink that
fails or a stream that cannot be reached never fails the call."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

from temporalio import activity

from noeta.deltas.base import DeltaBroker
from noeta.deltas.workflow_stream import FIRST_BATCH_SECONDS, CallPublisher
from noeta.protocols.messages import LLMRequest, LLMResponse, StreamDelta, StreamingProvider

logger = logging.getLogger(__name__)


def streams(provider: Any, sink: Callable[[StreamDelta], Any] | None, broker: DeltaBroker, workflow_stream: bool) -> bool:
    """Whether this call streams: the provider can, and someone may take the pieces."""
    return isinstance(provider, StreamingProvider) and (workflow_stream or sink is not None or broker.wants_deltas())


async def stream_call(
    provider: StreamingProvider,
    request: LLMRequest,
    task_id: str,
    turn: int,
    sink: Callable[[StreamDelta], Any] | None,
    broker: DeltaBroker,
    workflow_stream: bool,
    first_batch: float = FIRST_BATCH_SECONDS,
) -> LLMResponse:
    """``provider.stream(request)``, each piece handed to ``sink``, ``broker`` and (with
    ``workflow_stream``) the task's workflow stream, the first batch ``first_batch`` seconds after
    the first piece."""
    info = activity.info()
    call_id, seq = f"turn-{turn}", itertools.count()
    namespace = info.workflow_namespace or "default"
    publisher = None
    if workflow_stream and info.workflow_id and info.workflow_run_id:
        publisher = CallPublisher(
            activity.client(), info.workflow_id, info.workflow_run_id, call_id, info.attempt, first_batch
        )
        publisher.start()
    wants_deltas = sink is not None or broker.wants_deltas()

    def on_delta(kind: str, text: str) -> None:
        if publisher is not None:
            publisher.on_piece(kind, text)
        if not wants_deltas:
            return
        delta = StreamDelta(task_id=task_id, call_id=call_id, attempt=info.attempt, text=text, kind=kind, seq=next(seq))  # type: ignore[arg-type]
        if sink is not None:
            try:
                sink(delta)
            except Exception:  # a broken consumer must not fail the model call
                logger.exception("delta_sink failed")
        broker.publish(namespace, delta)

    try:
        response = await provider.stream(request, on_delta)
    except asyncio.CancelledError:
        if publisher is not None:  # the call is cancelled: stop at once, publish nothing more
            await publisher.aclose(publish_rest=False)
        raise
    except BaseException:
        if publisher is not None:  # a failed attempt's pieces still reach readers (marked by attempt, with its end)
            await publisher.aclose()
        raise
    if publisher is not None:
        await publisher.aclose()
    return response


__all__ = ["stream_call", "streams"]
