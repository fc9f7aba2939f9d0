"""A client's streamed deltas: read from each task's workflow stream, which is in the task's history
(:mod:`noeta.client.stream_reader`), and from a broker when one is configured (``NOETA_DELTA_BROKER``,
Redis: sooner, but pub/sub keeps nothing).

``HostConfig.delta_sink`` receives the pieces of every task the client follows (those it starts,
sends a goal to or waits for), read from their workflow streams; also those of a Redis broker (every
task's of the namespace) and of workers in the client's own process (in-process broker), each piece
once and in order. ``result()`` and ``send_goal()`` return once the sink has every piece of the
answer (:meth:`ClientDeltas.settle`): each batch is in the task's history before the call's result,
so history read up to the answer holds all of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio.client import Client as TemporalClient
from temporalio.service import RPCError

from noeta.client.stream_reader import ReadProgress, call_deltas, stream_items
from noeta.deltas.base import DeltaSink, ReaderSubscription, Subscription, deliver
from noeta.deltas.broker import DeltaBroker, DeltaStream, InProcessBroker, subscribe_stream
from noeta.errors import TaskCancelledError
from noeta.protocols.messages import StreamDelta

logger = logging.getLogger(__name__)
T = TypeVar("T")
V = TypeVar("V")

#: Failures in a row after which a client stops reading a task's stream (over 3 minutes of them).
READ_FAILURES_BEFORE_GIVING_UP = 12
READ_RETRY_MAX_SECONDS = 30.0
#: Tasks a client remembers pieces of (and ended tasks it remembers having read, so that following
#: one again delivers nothing twice).
READ_TASKS_KEPT = 10_000
#: Longest ``result()``/``send_goal()`` wait, after the answer, for the sink to have its pieces (the
#: history holding them is there already: this bounds a slow sink or an unreachable cluster).
SETTLE_SECONDS = 30.0

After = int | StreamDelta | None
"""Where a read starts: None, every piece; an offset N, the batch at N and every later one
(inclusive: the offset of any piece gives that piece and all after it); a delta read from the
stream, every piece after it (resuming without repeats)."""


class _Cursor:
    """Which pieces a read skips: those of batches before ``offset`` and, of the batch at
    ``offset``, those up to seq ``seq`` (the pieces of a batch are of one attempt, in seq order)."""

    def __init__(self, after: After) -> None:
        self.offset, self.seq = -1, -1
        if isinstance(after, StreamDelta):
            if after.offset is None:
                raise ValueError("this delta came through a broker or a worker's sink: it has no offset to resume after")
            self.offset, self.seq = after.offset, after.seq
        elif isinstance(after, int) and not isinstance(after, bool):
            self.offset = after
        elif after is not None:
            raise TypeError(f"after must be an offset, a StreamDelta or None, not {type(after).__name__}")

    def keeps(self, delta: StreamDelta) -> bool:
        assert delta.offset is not None
        return delta.offset > self.offset or (delta.offset == self.offset and delta.seq > self.seq)


class _Follower:
    """The read of one followed task's stream for the sink, and what it found."""

    def __init__(self) -> None:
        self.progress = ReadProgress()
        self.calls: dict[str, tuple[int, bool]] = {}
        """Call id -> (its latest attempt read, whether that attempt's end was read)."""
        self.reading: ReaderSubscription | None = None

    def saw(self, delta: StreamDelta) -> None:
        attempt, _ = self.calls.get(delta.call_id, (0, False))
        if delta.attempt >= attempt:
            self.calls[delta.call_id] = (delta.attempt, delta.final)


class ClientDeltas:
    """Where a client's deltas come from: each task's workflow stream, and the configured broker."""

    def __init__(self, temporal: TemporalClient, broker: DeltaBroker) -> None:
        """``broker``: the in-process broker (no broker configured) or the configured one."""
        self.temporal = temporal
        self.broker = broker
        self.from_workflow_streams = isinstance(broker, InProcessBroker)
        """True unless a broker (Redis) is configured: ``stream()`` reads the tasks' workflow
        streams (with a broker, the broker's from now on)."""
        self._sink: DeltaSink | None = None
        self._subscription: Subscription | None = None
        self._followed: dict[str, _Follower] = {}
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
        """Read ``task_id``'s workflow stream for the sink (once per task, until it ends). Also with
        a broker: pub/sub keeps nothing, the stream has every piece."""
        if self._sink is None or task_id in self._followed or task_id in self._read:
            return
        follower = self._followed[task_id] = _Follower()

        def take(delta: StreamDelta) -> Any:
            follower.saw(delta)
            return self._deliver(delta)

        async def read() -> None:
            try:
                if await read_resuming(self.temporal, task_id, None, take, progress=follower.progress):
                    _remember(self._read, task_id, None)  # never read again (its pieces would reach the sink twice)
                    self._last_seq.pop(task_id, None)
                # (given up: what the sink got stays known, so following the task again later
                # hands it only the pieces it has not had)
            finally:
                if self._followed.get(task_id) is follower:
                    del self._followed[task_id]

        follower.reading = ReaderSubscription(read(), f"noeta-deltas-{task_id}")

    async def settled(self, task_id: str, answer: Awaitable[T]) -> T:
        """``answer``'s result (or error), once the sink has every piece streamed up to it (see
        :meth:`settle`; a cancelled task's calls end without their end marks, which is no news)."""
        try:
            result = await answer
        except TaskCancelledError:
            await self.settle(task_id, check_ends=False)
            raise
        except Exception:
            await self.settle(task_id)
            raise
        await self.settle(task_id)
        return result

    async def settle(self, task_id: str, check_ends: bool = True, timeout: float = SETTLE_SECONDS) -> None:
        """Wait until the sink has every piece in ``task_id``'s history as it is now (call it once
        the answer is known: every piece of it is there). Logs a warning on ``noeta.client.deltas``
        when that takes longer than ``timeout`` and, with ``check_ends``, when the latest attempt
        of a call read has no end mark (its last pieces may be missing: the worker's log says why)."""
        follower = self._followed.get(task_id)
        if follower is None or follower.reading is None:
            return
        reading = follower.reading.reader
        try:
            description = await self.temporal.get_workflow_handle(task_id).describe()
        except RPCError as err:
            logger.warning("cannot tell whether the delta_sink has every piece of task %s: %s", task_id, err)
            return
        run_id, length = description.run_id or "", description.raw_description.workflow_execution_info.history_length
        try:
            async with asyncio.timeout(timeout):
                while not follower.progress.reached(run_id, length) and not reading.done():
                    follower.progress.changed.clear()
                    waiting = asyncio.ensure_future(follower.progress.changed.wait())
                    await asyncio.wait({waiting, reading}, return_when=asyncio.FIRST_COMPLETED)
                    waiting.cancel()
        except TimeoutError:
            logger.warning(
                "the delta_sink may not have every piece of task %s yet: its stream was not read up to the "
                "answer within %.0f s (last read error: %s); the rest goes on arriving", task_id, timeout,
                follower.progress.last_error or "none, the sink is slow",
            )
            return
        if not follower.progress.reached(run_id, length):
            logger.warning(
                "the delta_sink may lack pieces of task %s: reading its stream gave up (%s)",
                task_id, follower.progress.last_error,
            )
        missing = [f"{call} (attempt {attempt})" for call, (attempt, ended) in follower.calls.items() if not ended]
        if check_ends and missing:
            logger.warning(
                "the delta_sink may lack the last pieces of %s of task %s: their end mark is not in the task's "
                "stream (the call was cancelled, its worker was lost or could not publish them: see the "
                "worker's log, or it runs a release that marks no ends)", ", ".join(missing), task_id,
            )

    def _deliver(self, delta: StreamDelta) -> Any:
        """The sink gets each piece once and in order, whichever way it came first (workflow stream,
        broker): of a followed task, a piece past a gap is left to the workflow stream, which has
        them all."""
        if self._sink is None:
            return None
        seen = self._last_seq.get(delta.task_id)
        if seen is None:
            seen = {}
        _remember(self._last_seq, delta.task_id, seen)
        key, last = (delta.call_id, delta.attempt), seen.get((delta.call_id, delta.attempt), -1)
        if delta.seq <= last or (delta.seq > last + 1 and delta.task_id in self._followed):
            return None
        seen[key] = delta.seq
        return deliver(self._sink, delta)

    async def stream(self, task_id: str, after: After = None) -> DeltaStream:
        """``task_id``'s deltas as an async iterator: from its workflow stream from ``after`` (see
        :data:`After`), or, with a broker configured, from the broker (from now on)."""
        cursor = _Cursor(after)  # bad input fails here, before any read
        if not self.from_workflow_streams:
            return await subscribe_stream(self.broker, self.temporal.namespace, task_id)
        stream = DeltaStream()

        async def read() -> None:
            try:
                await read_resuming(self.temporal, task_id, cursor, stream._put)
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
        followers, self._followed = list(self._followed.values()), {}
        for follower in followers:
            if follower.reading is not None:
                await follower.reading.close()


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
    after: After | _Cursor,
    take: Callable[[StreamDelta], Any],
    give_up_after: int = READ_FAILURES_BEFORE_GIVING_UP,
    progress: ReadProgress | None = None,
) -> bool:
    """Hand every delta of ``task_id``'s stream from ``after`` (:data:`After`) to ``take`` (awaited
    when it returns a coroutine) until the task has ended. A read that fails (the cluster unreachable
    for a while, a piece ``take`` refused) starts again after the last piece taken, at once and then
    after pauses that double up to READ_RETRY_MAX_SECONDS; ``give_up_after`` failures in a row end
    it (logged). True once the stream was read to its end, False if the reader gave up."""
    failures = 0
    cursor = after if isinstance(after, _Cursor) else _Cursor(after)
    progress = progress or ReadProgress()
    while True:
        try:
            async for offset, call in stream_items(temporal, task_id, progress):
                for delta in call_deltas(task_id, call, offset):
                    if not cursor.keeps(delta):
                        continue
                    result = take(delta)
                    if asyncio.iscoroutine(result):
                        await result
                    cursor, failures = _Cursor(delta), 0
            return True  # the task ended and its stream was read to the end
        except Exception as err:  # noqa: BLE001 (one task's stream must not stop the others)
            failures += 1
            progress.last_error = f"{type(err).__name__}: {err}"
            if failures >= give_up_after:
                logger.exception("gave up reading the delta stream of task %s after %d failures", task_id, failures)
                return False
            logger.warning("reading the delta stream of task %s failed; reading on", task_id, exc_info=True)
            await asyncio.sleep(0 if failures == 1 else min(READ_RETRY_MAX_SECONDS, 0.5 * 2**failures))


__all__ = ["After", "ClientDeltas", "read_resuming"]
