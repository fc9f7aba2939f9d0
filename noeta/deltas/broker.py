"""The in-process broker (the default), choosing a broker by URL, and a task's delta stream.

The broker interface and the wire form are in :mod:`noeta.deltas.base`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

from pydantic import Field, field_validator

from noeta.config.settings import EnvSettings
from noeta.deltas.base import DeltaBroker, DeltaSink, Subscription, deliver
from noeta.deltas.redis import RedisBroker
from noeta.deltas.workflow_stream import FIRST_BATCH_SECONDS
from noeta.errors import ConfigurationError
from noeta.protocols.messages import StreamDelta

#: Where workers publish streamed deltas and clients receive them (unset: inside one process).
DELTA_BROKER_VARIABLE = "NOETA_DELTA_BROKER"
#: "0" turns off publishing to the task's workflow stream (Temporal's Workflow Streams; on by default).
WORKFLOW_STREAM_VARIABLE = "NOETA_WORKFLOW_STREAM"
#: Seconds from a streamed call's first piece to its first batch on the task's workflow stream.
FIRST_BATCH_VARIABLE = "NOETA_STREAM_FIRST_BATCH"


@dataclasses.dataclass(eq=False)
class _Listener:
    broker: InProcessBroker
    namespace: str
    task_id: str | None
    sink: DeltaSink

    async def close(self) -> None:
        if self in self.broker._listeners:
            self.broker._listeners.remove(self)


class InProcessBroker:
    """Delivers deltas to sinks in this process, synchronously as they are published (so a task's
    deltas have all arrived when its result has)."""

    def __init__(self) -> None:
        """Starts with no listeners."""
        self._listeners: list[_Listener] = []

    def wants_deltas(self) -> bool:
        """True while a sink of this process listens."""
        return bool(self._listeners)

    def publish(self, namespace: str, delta: StreamDelta) -> None:
        """Deliver ``delta`` to every sink listening to its namespace and task; an awaitable a sink
        returns is scheduled, not awaited."""
        for listener in list(self._listeners):
            if listener.namespace == namespace and listener.task_id in (None, delta.task_id):
                result = deliver(listener.sink, delta)
                if asyncio.iscoroutine(result):
                    asyncio.ensure_future(result)

    async def subscribe(self, namespace: str, sink: DeltaSink, task_id: str | None = None) -> Subscription:
        """Deliver the deltas of ``namespace`` (of task ``task_id`` only, unless None) to ``sink``
        until the subscription is closed."""
        listener = _Listener(self, namespace, task_id, sink)
        self._listeners.append(listener)
        return listener


_IN_PROCESS = InProcessBroker()


def in_process_broker() -> InProcessBroker:
    """The process-wide in-process broker: every worker and client of this process share it."""
    return _IN_PROCESS


_REDIS: dict[str, DeltaBroker] = {}


def broker_for(url: str | None) -> DeltaBroker:
    """The broker ``url`` names (one per URL and process): ``redis://`` or ``rediss://``, or None
    for the in-process broker."""
    if not url:
        return _IN_PROCESS
    _check_url(url)
    if url not in _REDIS:
        _REDIS[url] = RedisBroker(url)
    return _REDIS[url]


def _check_url(url: str) -> str:
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigurationError(f"{DELTA_BROKER_VARIABLE} must be a redis:// URL, got {url.split(':')[0]}:…")
    return url


class DeltaSettings(EnvSettings):
    """A worker's delta broker, from ``NOETA_DELTA_BROKER`` (empty: unset), and whether it
    publishes to the tasks' workflow streams (``NOETA_WORKFLOW_STREAM``)."""

    url: str | None = Field(default=None, validation_alias=DELTA_BROKER_VARIABLE)
    """``redis://``, ``rediss://`` or ``unix://`` URL of the broker (None: in this process)."""
    workflow_stream: bool = Field(default=True, validation_alias=WORKFLOW_STREAM_VARIABLE)
    """Publish a call's pieces to the task's workflow stream, in batches recorded in its history
    (``NOETA_WORKFLOW_STREAM=0``: never; clients then get pieces only from a broker, with no
    guarantee that they have all of them when the answer comes)."""
    first_batch_seconds: float = Field(default=FIRST_BATCH_SECONDS, ge=0.0, le=60.0, validation_alias=FIRST_BATCH_VARIABLE)
    """Seconds from a call's first piece to its first batch: sooner shows text sooner, and a call
    longer than it costs one more batch in history (~470 bytes)."""

    @field_validator("url", mode="after")
    @classmethod
    def _redis(cls, url: str | None) -> str | None:
        return _check_url(url) if url else None

    def broker(self) -> DeltaBroker:
        """The broker these settings name."""
        return broker_for(self.url)


class DeltaStream:
    """The deltas of one task as they arrive: ``async for delta in stream``; ``await
    stream.close()`` (or ``async with``) ends the subscription. A stream read from the task's
    workflow stream (``ends_with_task``) also ends by itself once the task has ended and every
    piece has been read; a broker's goes on until closed."""

    def __init__(self) -> None:
        """Must be created on the event loop that reads the stream."""
        self._queue: asyncio.Queue[StreamDelta | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._subscription: Subscription | None = None
        self.ends_with_task = False
        """True when the iteration ends by itself after the task's last piece."""

    async def _open(self, broker: DeltaBroker, namespace: str, task_id: str) -> DeltaStream:
        self._subscription = await broker.subscribe(namespace, self._put, task_id)
        return self

    def _put(self, delta: StreamDelta | None) -> None:
        """Hand one delta to the reader (None: the stream has ended); from any thread."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, delta)

    def __aiter__(self) -> AsyncIterator[StreamDelta]:
        """The stream is its own iterator."""
        return self

    async def __anext__(self) -> StreamDelta:
        """The next delta; the iteration ends once the stream is closed or has ended."""
        if self._subscription is None:
            raise StopAsyncIteration
        delta = await self._queue.get()
        if delta is None:
            raise StopAsyncIteration
        return delta

    async def close(self) -> None:
        """End the subscription (idempotent)."""
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.close()

    async def __aenter__(self) -> DeltaStream:
        """Return the stream itself."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the stream."""
        await self.close()


async def subscribe_stream(broker: DeltaBroker, namespace: str, task_id: str) -> DeltaStream:
    """A :class:`DeltaStream` of ``task_id``, subscribed when this returns."""
    return await DeltaStream()._open(broker, namespace, task_id)


# DeltaBroker, DeltaSink and Subscription are re-exported: callers import them from here.
__all__ = [
    "DELTA_BROKER_VARIABLE", "FIRST_BATCH_VARIABLE", "WORKFLOW_STREAM_VARIABLE", "DeltaBroker", "DeltaSettings", "DeltaSink", "DeltaStream", "InProcessBroker", "Subscription",
    "broker_for", "in_process_broker", "subscribe_stream",
]
