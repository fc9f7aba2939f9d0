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
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio.client import Client as TemporalClient

from noeta.deltas.base import DeltaSink, ReaderSubscription, Subscription, deliver
from noeta.deltas.broker import DeltaBroker, DeltaStream, InProcessBroker, subscribe_stream
from noeta.deltas.workflow_stream import read_task_stream
from noeta.protocols.messages import StreamDelta

logger = logging.getLogger(__name__)
V = TypeVar("V")

#: Failures in a row after which a client stops reading a task's stream (over 3 minutes of them).
READ_FAILURES_BEFORE_GIVING_UP = 12
READ_RETRY_MAX_SECONDS = 30.0
#: Tasks a client remembers pieces of (and ended tasks it remembers having read, so that following
#: one again delivers nothing twice).
READ_TASKS_KEPT = 10_000


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
        # The last piece handed to the sink, by task, then by (call id, attempt). A followed task's
        # entry goes once its stream has been read to the end; at most READ_TASKS_KEPT are kept
        # (a long-lived client sees pieces of tasks it does not follow through its broker too).
        self._last_seq: OrderedDict[str, dict[tuple[str, int], int]] = OrderedDict()
        self._read: OrderedDict[str, None] = OrderedDict()  # tasks whose streams were read to the end

    async def open(self, sink: DeltaSink | None) -> None:
        """Hand deltas to ``sink``: from the broker (every task's of the namespace: a Redis broker's,
        or the workers' of this process), and from the tasks this client follows."""
        self._sink = sink
        if sink is not None:
            self._subscription = await self.broker.subscribe(self.temporal.namespace, self._deliver)

    def follow(self, task_id: str) -> None:
        """Read ``task_id``'s workflow stream for the sink (once per task, until it ends)."""
        if self._sink is None or not self.from_workflow_streams or task_id in self._followed or task_id in self._read:
            return

        async def read() -> None:
            try:
                if await read_resuming(self.temporal, task_id, None, self._deliver):
                    _remember(self._read, task_id, None)  # never read again (its pieces would reach the sink twice)
                    self._last_seq.pop(task_id, None)
                # (given up: what the sink got stays known, so following the task again later
                # hands it only the pieces it has not had)
            finally:
                self._followed.pop(task_id, None)

        self._followed[task_id] = ReaderSubscription(read(), f"noeta-deltas-{task_id}")

    def _deliver(self, delta: StreamDelta) -> Any:
        """The sink gets each piece once, whichever way it came first (workflow stream, broker)."""
        if self._sink is None:
            return None
        seen = self._last_seq.get(delta.task_id)
        if seen is None:
            seen = {}
        _remember(self._last_seq, delta.task_id, seen)
        key = (delta.call_id, delta.attempt)
        if delta.seq <= seen.get(key, -1):
            return None
        seen[key] = delta.seq
        return deliver(self._sink, delta)

    async def stream(self, task_id: str, after: int | None = None) -> DeltaStream:
        """``task_id``'s deltas as an async iterator: from its workflow stream after offset
        ``after`` (None: from the current call's first piece), or from the broker (from now on)."""
        if not self.from_workflow_streams:
            return await subscribe_stream(self.broker, self.temporal.namespace, task_id)
        stream = DeltaStream()

        async def read() -> None:
            try:
                await read_resuming(self.temporal, task_id, after, stream._put)
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


def _remember(table: OrderedDict[str, V], key: str, value: V) -> None:
    """Keep ``key`` as the most recently used entry of ``table``, which holds at most READ_TASKS_KEPT
    (the least recently used go first)."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > READ_TASKS_KEPT:
        table.popitem(last=False)


async def read_resuming(
    temporal: TemporalClient,
    task_id: str,
    after: int | None,
    take: Callable[[StreamDelta], Any],
    give_up_after: int = READ_FAILURES_BEFORE_GIVING_UP,
) -> bool:
    """Hand every delta of ``task_id``'s stream after offset ``after`` to ``take`` (awaited when it
    returns a coroutine) until the task has ended. A read that fails (the cluster unreachable for a
    while, a piece ``take`` refused) starts again after the last piece taken, at once and then after
    pauses that double up to READ_RETRY_MAX_SECONDS (pieces of calls that ended meanwhile may be gone:
    a stream keeps the current call's and the one before); ``give_up_after`` failures in a row end
    it (logged).
    True once the stream was read to its end, False if the reader gave up."""
    failures = 0
    last: StreamDelta | None = None  # the last piece taken
    while True:
        # The pieces of one batch share its offset: a read begun again re-reads the batch of the
        # last piece taken and skips what was taken of it.
        start = after if last is None or last.offset is None else last.offset - 1
        try:
            async for delta in read_task_stream(temporal, task_id, start):
                if last is not None and delta.offset == last.offset and delta.seq <= last.seq:
                    continue
                result = take(delta)
                if asyncio.iscoroutine(result):
                    await result
                last, failures = delta, 0
            return True  # the task ended and its stream was read to the end
        except Exception:  # noqa: BLE001 (one task's stream must not stop the others)
            failures += 1
            if failures >= give_up_after:
                logger.exception("gave up reading the delta stream of task %s after %d failures", task_id, failures)
                return False
            logger.warning("reading the delta stream of task %s failed; reading on", task_id, exc_info=True)
            # At once the first time: a stream keeps a call's pieces only until the next call but one.
            await asyncio.sleep(0 if failures == 1 else min(READ_RETRY_MAX_SECONDS, 0.5 * 2**failures))


__all__ = ["ClientDeltas", "read_resuming"]
