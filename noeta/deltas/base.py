"""What every delta broker shares: the broker interface and the wire form of a delta.

The brokers (:mod:`noeta.deltas.broker`, :mod:`noeta.deltas.redis`) import this module and never
each other's internals, so choosing a broker (``broker_for``) can import them all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from noeta.protocols.messages import StreamDelta

logger = logging.getLogger(__name__)

DeltaSink = Callable[[StreamDelta], Any]
"""Receives one delta; it may return an awaitable, which the broker schedules."""


class Subscription(Protocol):
    """A listening sink; ``close()`` stops its deliveries."""

    async def close(self) -> None:
        """Stop delivering to the sink and release the subscription's connection, if any."""


class DeltaBroker(Protocol):
    """Carries deltas from the workers that stream them to the clients that listen."""

    def wants_deltas(self) -> bool:
        """Whether a worker should stream at all (someone may listen)."""
        ...

    def publish(self, namespace: str, delta: StreamDelta) -> None:
        """Hand ``delta`` over without waiting; deltas of one process are delivered in the order
        they were published, and a broker that fails never fails the model call."""
        ...

    async def subscribe(self, namespace: str, sink: DeltaSink, task_id: str | None = None) -> Subscription:
        """Call ``sink`` with every delta of ``task_id`` (None: of every task in ``namespace``)."""
        ...


class ReaderSubscription:
    """A subscription served by one asyncio task that reads the deltas; ``close()`` cancels it and
    waits for it to end."""

    def __init__(self, reader: Coroutine[Any, Any, None], name: str) -> None:
        """Start ``reader`` as a task named ``name`` on the running loop."""
        self._reader = asyncio.get_running_loop().create_task(reader, name=name)

    @property
    def reader(self) -> asyncio.Task[None]:
        """The reading task (done once the reader has ended by itself or was closed)."""
        return self._reader

    async def close(self) -> None:
        """Cancel the reading task and wait for it (what it raised on the way out is not news)."""
        self._reader.cancel()
        try:
            await self._reader
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 (closing: nothing to report)
            pass


def delta_to_json(delta: StreamDelta) -> bytes:
    """The compact JSON a delta crosses processes as."""
    return json.dumps(dataclasses.asdict(delta), separators=(",", ":")).encode()


def delta_from_json(data: bytes | str) -> StreamDelta:
    """A delta back from :func:`delta_to_json`; fields this version does not know are dropped."""
    raw = json.loads(data)
    names = {f.name for f in dataclasses.fields(StreamDelta)}
    return StreamDelta(**{k: v for k, v in raw.items() if k in names})


def deliver(sink: DeltaSink, delta: StreamDelta) -> Any:
    """``sink(delta)``; a sink that raises is logged, so one broken consumer does not stop the others
    (an async sink's coroutine is returned wrapped, to be awaited: it logs what the sink raises)."""
    try:
        result = sink(delta)
    except Exception:
        logger.exception("delta sink failed")
        return None
    return _logged(result) if inspect.iscoroutine(result) else result


async def _logged(delivery: Coroutine[Any, Any, Any]) -> None:
    try:
        await delivery
    except Exception:
        logger.exception("delta sink failed")


__all__ = ["DeltaBroker", "DeltaSink", "ReaderSubscription", "Subscription", "deliver", "delta_from_json", "delta_to_json"]
