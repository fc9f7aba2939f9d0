"""Deltas over Redis pub/sub: channel ``noeta:deltas:{namespace}:{task_id}``.

A worker process publishes through one connection and one queue, so the deltas it publishes arrive
in order; pub/sub keeps nothing, so a client sees the deltas streamed while it listens (history
has the final responses). Both sides outlive a Redis restart: a subscription connects and
subscribes again by itself, and a delta Redis refused is sent again (for up to
``RETRY_SECONDS``) once it is back. Needs the ``noeta[redis]`` extra.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from noeta.deltas.base import DeltaSink, ReaderSubscription, Subscription, deliver, delta_from_json, delta_to_json
from noeta.errors import ConfigurationError
from noeta.protocols.messages import StreamDelta
from noeta.protocols.names import DELTA_CHANNEL_PREFIX

logger = logging.getLogger(__name__)

#: Deltas waiting to be published; beyond this a slow Redis makes the worker drop deltas, not wait.
MAX_QUEUED = 10_000
#: How long a delta is sent again while Redis cannot be reached, before it is dropped (and counted).
RETRY_SECONDS = 30.0
#: Waits between two tries to reach Redis again (a publisher's or a subscription's), seconds.
RECONNECT_WAITS = (0.05, 0.1, 0.2, 0.5, 1.0)


def channel(namespace: str, task_id: str) -> str:
    """The Redis pub/sub channel of a task's deltas in ``namespace``."""
    return f"{DELTA_CHANNEL_PREFIX}{namespace}:{task_id}"


def _redis() -> Any:
    try:
        import redis.asyncio as redis
    except ImportError as err:
        raise ConfigurationError(
            "NOETA_DELTA_BROKER=redis://… needs the redis package: pip install 'noeta[redis]'"
        ) from err
    return redis


def _wait(tries: int) -> float:
    return RECONNECT_WAITS[min(tries, len(RECONNECT_WAITS) - 1)]


class RedisBroker:
    """Carries deltas between processes through Redis pub/sub (``NOETA_DELTA_BROKER=redis://...``),
    one channel per task. Publishing never waits: a full queue drops deltas and counts them."""
    def __init__(self, url: str) -> None:
        """``url``: the Redis server (``redis://host:port/db``); ConfigurationError without the
        redis package."""
        self.url = url
        self._redis = _redis()
        self._queue: asyncio.Queue[tuple[str, bytes]] | None = None
        self._publisher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.dropped = 0
        """Deltas dropped because Redis could not keep up or was unreachable."""

    def wants_deltas(self) -> bool:
        """Always True: the listeners are in other processes."""
        return True  # listeners are in other processes

    def publish(self, namespace: str, delta: StreamDelta) -> None:
        """Queue ``delta`` for this loop's publisher task (started on first use); dropped and
        counted when the queue is full."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._publisher is None or self._publisher.done():
            self._loop, self._queue = loop, asyncio.Queue(MAX_QUEUED)
            self._publisher = loop.create_task(self._publish_queued(self._queue), name="noeta-delta-publisher")
        assert self._queue is not None
        try:
            self._queue.put_nowait((channel(namespace, delta.task_id), delta_to_json(delta)))
        except asyncio.QueueFull:
            self.dropped += 1

    async def _publish_queued(self, queue: asyncio.Queue[tuple[str, bytes]]) -> None:
        client = self._redis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=5)
        try:
            while True:
                name, data = await queue.get()
                await self._publish_one(client, name, data)
        finally:
            await client.aclose()

    async def _publish_one(self, client: Any, name: str, data: bytes) -> None:
        """Publish one delta, sending it again while Redis cannot be reached (RETRY_SECONDS)."""
        deadline = asyncio.get_running_loop().time() + RETRY_SECONDS
        tries = 0
        while True:
            try:
                await client.publish(name, data)
                return
            except Exception as err:  # noqa: BLE001 (streaming is best effort; history is the record)
                if asyncio.get_running_loop().time() >= deadline:
                    self.dropped += 1
                    logger.warning("cannot publish a delta to %s: %s", name, err)
                    return
                if tries == 0:
                    logger.warning("cannot publish a delta to %s (sending it again): %s", name, err)
                await asyncio.sleep(_wait(tries))
                tries += 1

    async def subscribe(self, namespace: str, sink: DeltaSink, task_id: str | None = None) -> Subscription:
        """Listen on the channel of ``task_id`` (of every task of ``namespace`` when None) and hand
        each delta to ``sink``."""
        name = channel(namespace, "*" if task_id is None else task_id)
        subscribed = asyncio.get_running_loop().create_future()

        async def read() -> None:
            tries = 0
            while True:  # subscribe again after Redis went away (a restart, a dropped connection)
                client = self._redis.Redis.from_url(self.url, socket_connect_timeout=5)
                pubsub = client.pubsub()
                try:
                    await (pubsub.psubscribe(name) if task_id is None else pubsub.subscribe(name))
                    if not subscribed.done():
                        subscribed.set_result(None)
                    elif tries:
                        logger.info("subscribed again to %s", name)
                    tries = 0
                    await self._deliver_all(pubsub, sink)
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # noqa: BLE001 (Redis went away: try again)
                    if not subscribed.done():
                        subscribed.set_exception(err)
                        return
                    if tries == 0:
                        logger.warning("lost the subscription to %s (subscribing again): %s", name, err)
                finally:
                    await asyncio.shield(_close(pubsub, client))
                await asyncio.sleep(_wait(tries))
                tries += 1

        subscription = ReaderSubscription(read(), "noeta-delta-reader")
        await subscribed  # the first subscription's failure is the caller's
        return subscription

    async def _deliver_all(self, pubsub: Any, sink: DeltaSink) -> None:
        async for message in pubsub.listen():
            if message.get("type") not in ("message", "pmessage"):
                continue
            try:
                delta = delta_from_json(message["data"])
            except (ValueError, TypeError):
                logger.warning("ignoring a malformed delta on %s", message.get("channel"))
                continue
            result = deliver(sink, delta)
            if asyncio.iscoroutine(result):
                await result


async def _close(pubsub: Any, client: Any) -> None:
    for resource in (pubsub, client):
        try:
            await resource.aclose()
        except Exception:  # noqa: BLE001 (closing a connection Redis already dropped)
            pass
