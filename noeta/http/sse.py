"""Server-Sent Events: a task's event log (envelopes, resumable by ``seq``) and its streamed model
text (deltas), each with keep-alive comments and an ``end`` event (docs/http.md). FastAPI's own SSE
support frames the messages (``fastapi.sse``); this module chooses what they say and when."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import asdict
from typing import Any, TypeVar

from fastapi.sse import EventSourceResponse, format_sse_event
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from noeta.client.client import AsyncClient
from noeta.client.wire import envelope_to_dict
from noeta.http.errors import error_body
from noeta.protocols.event_log import EventEnvelope
from noeta.protocols.messages import StreamDelta

logger = logging.getLogger(__name__)

#: Seconds of silence after which a stream gets a ``: keep-alive`` comment.
KEEPALIVE_SECONDS = 15.0
#: Response headers of every stream (no caching, no proxy buffering).
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}



class EventStream(StreamingResponse):
    """A ``text/event-stream`` response with the stream :data:`HEADERS`; as an endpoint's
    ``response_class`` it also tells the OpenAPI document what the endpoint answers. (Not FastAPI's
    EventSourceResponse: as a ``response_class`` that one makes FastAPI iterate the endpoint
    itself, with its own fixed keep-alive; these streams choose theirs, ``keepalive_seconds``.)"""

    media_type = EventSourceResponse.media_type

    def __init__(
        self,
        content: AsyncIterable[bytes],
        status_code: int = 200,
        headers: dict[str, str] | None = None,
        media_type: str | None = None,
        background: BackgroundTask | None = None,
    ) -> None:
        """A stream of ``content``; the stream headers are added to ``headers``."""
        super().__init__(content, status_code, {**HEADERS, **(headers or {})}, media_type, background)


T = TypeVar("T")
_END = object()
_background: set[asyncio.Task[Any]] = set()


#: The comment a silent stream sends so that proxies keep it open.
KEEPALIVE = format_sse_event(comment="keep-alive")


def sse_event(event: str, data: Any, id: int | str | None = None) -> bytes:
    """One SSE message; ``data`` is JSON on a single line (json.dumps escapes newlines)."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return format_sse_event(event=event, data_str=body, id=None if id is None else str(id))


def sse_envelope(env: EventEnvelope) -> bytes:
    """One envelope as an SSE message: its type as the event, its seq as the id, its JSON as the
    data."""
    return sse_event(env.type, envelope_to_dict(env), id=env.seq)


def sse_delta(delta: StreamDelta, index: int = 0) -> bytes:
    """One streamed delta as an SSE ``delta`` event; from a task's workflow stream its id is
    ``OFFSET:INDEX`` (its batch's offset, its place in that batch), which Last-Event-ID resumes after."""
    body = {k: v for k, v in asdict(delta).items() if v is not None}
    return sse_event("delta", body, id=None if delta.offset is None else f"{delta.offset}:{index}")


async def _with_keepalive(
    items: AsyncIterable[T], render: Callable[[T], bytes], keepalive_seconds: float, what: str
) -> AsyncIterator[bytes | tuple[str, Any]]:
    """``render(item)`` per item, a keep-alive comment per silence; ``("error", err)`` if reading
    fails after the response started (the status line is already sent)."""
    iterator = items.__aiter__()

    async def next_item() -> Any:
        try:
            return await iterator.__anext__()
        except StopAsyncIteration:
            return _END

    pending: asyncio.Task[Any] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(next_item())
            done, _ = await asyncio.wait({pending}, timeout=keepalive_seconds)
            if not done:
                yield KEEPALIVE
                continue
            finished, pending = pending, None
            try:
                item = finished.result()
            except Exception as err:
                logger.exception("%s failed", what)
                yield ("error", err)
                return
            if item is _END:
                return
            yield ("item", item)
            yield render(item)
    finally:
        # The client went away (or the stream ended): stop the long poll and the reader.
        if pending is not None:
            pending.cancel()
        elif hasattr(iterator, "aclose"):
            closing = asyncio.ensure_future(iterator.aclose())
            _background.add(closing)
            closing.add_done_callback(_background.discard)


async def envelope_stream(
    client: AsyncClient, task_id: str, after_seq: int, follow: bool, keepalive_seconds: float
) -> AsyncIterator[bytes]:
    """The task's envelopes after ``after_seq``, then an ``end`` event with the last ``seq``."""
    last_seq = after_seq
    stream = client.events(task_id, after_seq=after_seq, follow=follow)
    async for out in _with_keepalive(stream, sse_envelope, keepalive_seconds, f"event stream of task {task_id}"):
        if isinstance(out, bytes):
            yield out
        elif out[0] == "item":
            last_seq = out[1].seq
        else:
            yield sse_event("stream-error", error_body(out[1]))
            return
    yield sse_event("end", {"task_id": task_id, "last_seq": last_seq, "follow": follow})


async def delta_stream(
    client: AsyncClient, task_id: str, keepalive_seconds: float, after: tuple[int, ...] | None = None
) -> AsyncIterator[bytes]:
    """The model text a task streams, as ``delta`` events, until the task ends (then ``end``):
    from its workflow stream, every piece or those after the delta ``after`` names (``(offset,
    index)``, an SSE id); with a broker configured, from now on. Advisory: a retried attempt's
    deltas carry its attempt number, and the final response is in the event log."""
    offset, index = (after[0], after[1]) if after is not None else (None, -1)
    # Read the batch the last delta was in from its first piece (an offset is inclusive), skipping
    # what was sent of it.
    deltas = await client.deltas(task_id, offset)
    ended = asyncio.ensure_future(client.result(task_id))  # however it ends: failing ends the stream too
    ended.add_done_callback(lambda f: f.cancelled() or f.exception())
    places: dict[int | None, int] = {}

    async def until_ended() -> AsyncIterator[tuple[StreamDelta, int]]:
        iterator = deltas.__aiter__()
        while True:
            following = asyncio.ensure_future(iterator.__anext__())
            # When the page goes away this read may end (StopAsyncIteration as the stream closes)
            # with nobody awaiting it: read its outcome here, or asyncio logs it as never retrieved.
            following.add_done_callback(lambda f: f.cancelled() or f.exception())
            # A workflow stream ends by itself after the task's last piece; a broker's does not.
            waits = {following} if deltas.ends_with_task else {following, ended}
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:  # the response was closed while waiting
                following.cancel()
                raise
            if following.done():
                try:
                    delta = following.result()
                except StopAsyncIteration:
                    return
                place = places[delta.offset] = places.get(delta.offset, -1) + 1
                if delta.offset is None or delta.offset != offset or place > index:
                    yield delta, place
                continue
            following.cancel()
            return

    try:
        async for out in _with_keepalive(
            until_ended(), lambda d: sse_delta(*d), keepalive_seconds, f"delta stream of task {task_id}"
        ):
            if isinstance(out, bytes):
                yield out
            elif out[0] == "error":
                yield sse_event("stream-error", error_body(out[1]))
                return
        yield sse_event("end", {"task_id": task_id})
    finally:
        ended.cancel()
        closing = asyncio.ensure_future(deltas.close())
        _background.add(closing)
        closing.add_done_callback(_background.discard)
