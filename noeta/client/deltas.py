"""A client's streamed deltas: read from the task's workflow stream through Temporal (the default),
or from a broker when one is configured (``NOETA_DELTA_BROKER``, Redis: for very high rates).

``HostConfig.delta_sink`` receives the pieces of every task the client follows (those it starts,
sends a goal to or waits for), read from their workflow streams; also, as before, those of workers
in the client's own process (in-process broker), each piece once. With a Redis broker the sink gets
every task's pieces in the namespace from Redis instead.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from temporalio.client import Client as TemporalClient

from noeta.deltas.base import DeltaSink, ReaderSubscription, Subscription, deliver
from noeta.deltas.broker import DeltaBroker, DeltaStream, InProcessBroker, subscribe_stream
from noeta.deltas.workflow_stream import read_task_stream
from noeta.protocols.messages import StreamDelta

logger = logging.getLogger(__name__)


class ClientDeltas:
    """Where a client's deltas come from: each task's workflow stream, or the configured broker."""

    def __init__(self, temporal: TemporalClient, broker: DeltaBroker) -> None:
        """``broker``: the in-process broker (no broker configured) or the configured one."""
        self.temporal = temporal
        self.broker = broker
        self.from_workflow_streams = isinstance(broker, InProcessBroker)
        """True unless a broker (Redis) is configured: clients read the tasks' workflow streams."""
        self._sink: DeltaSink | None = None
        self._subscription: Subscription | None = None
        self._followed: dict[str, ReaderSubscription] = {}
        self._last_seq: dict[tuple[str, str, int], int] = {}

    async def open(self, sink: DeltaSink | None) -> None:
        """Hand deltas to ``sink``: from the broker (every task's of the namespace: a Redis broker's,
        or the workers' of this process), and from the tasks this client follows."""
        self._sink = sink
        if sink is not None:
            self._subscription = await self.broker.subscribe(self.temporal.namespace, self._deliver)

    def follow(self, task_id: str) -> None:
        """Read ``task_id``'s workflow stream for the sink (once per task, until it ends)."""
        if self._sink is None or not self.from_workflow_streams or task_id in self._followed:
            return

        async def read() -> None:
            try:
                async for delta in read_task_stream(self.temporal, task_id):
                    result = self._deliver(delta)
                    if asyncio.iscoroutine(result):
                        await result
            except Exception:  # noqa: BLE001 (one task's stream must not stop the others)
                logger.exception("reading the delta stream of task %s failed", task_id)

        self._followed[task_id] = ReaderSubscription(read(), f"noeta-deltas-{task_id}")

    def _deliver(self, delta: StreamDelta) -> Any:
        """The sink gets each piece once, whichever way it came first (workflow stream, broker)."""
        key = (delta.task_id, delta.call_id, delta.attempt)
        if delta.seq <= self._last_seq.get(key, -1) or self._sink is None:
            return None
        self._last_seq[key] = delta.seq
        return deliver(self._sink, delta)

    async def stream(self, task_id: str, after: int | None = None) -> DeltaStream:
        """``task_id``'s deltas as an async iterator: from its workflow stream after offset
        ``after`` (None: from the current call's first piece), or from the broker (from now on)."""
        if not self.from_workflow_streams:
            return await subscribe_stream(self.broker, self.temporal.namespace, task_id)
        stream = DeltaStream()

        async def read() -> None:
            try:
                async for delta in read_task_stream(self.temporal, task_id, after):
                    stream._put(delta)
            except Exception:  # noqa: BLE001 (the stream ends; the reader's caller sees it end)
                logger.exception("reading the delta stream of task %s failed", task_id)
            finally:
                stream._put(None)

        stream.ends_with_task = True
        stream._subscription = ReaderSubscription(read(), f"noeta-stream-{task_id}")
        return stream

    async def close(self) -> None:
        """Stop every subscription and read."""
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.close()
        readers, self._followed = list(self._followed.values()), {}
        for reader in readers:
            await reader.close()


__all__ = ["ClientDeltas"]
