"""Deltas through Temporal alone: the task's workflow stream (Temporal's Workflow Streams, hosted by
the task's workflow, :mod:`noeta.workflows.streams`).

A model call's pieces are published in batches, one stream item per batch, by
:class:`CallPublisher` (in the model-call activity) and only while a reader listens; a reader
(:func:`read_task_stream`) says it listens with a signal, then reads the stream's retained items
with its poll query, from an offset. A query adds nothing to history, so readers cost history only
their listen signals and the batches they cause to be published.

Each batch is one ``noeta.stream_batch`` signal with a compact JSON argument, and becomes one
stream item (both forms: :mod:`noeta.protocols.stream_batches`).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistoryEventFilterType, WorkflowQueryFailedError
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.service import RPCError

from noeta.protocols.messages import StreamDelta
from noeta.protocols.names import QUERY_STREAM_LISTENING, SIGNAL_STREAM_BATCH, SIGNAL_STREAM_LISTEN, WORKFLOW_STREAM_POLL
from noeta.protocols.stream_batches import batch_body, item_pieces

logger = logging.getLogger(__name__)

#: Seconds from a call's first piece to its first batch (a worker's NOETA_STREAM_FIRST_BATCH); later
#: batches go BATCH_SECONDS apart and the rest when the call ends. Each batch costs ~470 bytes of
#: history besides its text (its signal and the workflow task it causes), so a call shorter than the
#: first wait costs one batch; a reader who joins later gets the pieces so far at once.
FIRST_BATCH_SECONDS = 1.5
BATCH_SECONDS = 2.0
#: How often a call nobody listens to asks again whether someone does (a query: no history).
LISTEN_CHECK_SECONDS = 1.0
#: Seconds a reader's listen signal lasts; it renews it at half of that. Long, because each renewal
#: is a signal in history (a reader of an idle task adds 12 an hour); a reader that went away
#: leaves calls published for at most this long.
LISTEN_LEASE_SECONDS = 600.0
#: How often a reader asks for new items while the task runs (doubling, up to IDLE_POLL_SECONDS,
#: while nothing new comes: a reader of an idle task costs its worker little).
POLL_SECONDS = 0.2
IDLE_POLL_SECONDS = 1.0
#: Longest the end of a call waits for its last batch to be taken (the model call never fails for it).
FINAL_FLUSH_SECONDS = 10.0
#: How long one question "does someone listen?" may take (a query through the task's worker).
LISTEN_QUERY_SECONDS = 5.0


def batch_deltas(task_id: str, payload: Payload, offset: int) -> list[StreamDelta]:
    """The deltas of one stream item at ``offset``; an item this version cannot read gives none."""
    try:
        call_id, attempt, seq, pieces = item_pieces(payload.data)
    except (ValueError, KeyError, TypeError, IndexError):
        logger.warning("ignoring an unreadable item at offset %d of task %s's stream", offset, task_id)
        return []
    return [
        StreamDelta(task_id=task_id, call_id=call_id, attempt=attempt, text=text, kind=kind, seq=seq + i, offset=offset)  # type: ignore[arg-type]
        for i, (kind, text) in enumerate(pieces)
    ]


class CallPublisher:
    """Publishes one model call attempt's pieces to its task's stream while someone listens: a late
    reader gets them all, as the first batch holds every piece since the call started."""

    def __init__(
        self,
        temporal: Client,
        task_id: str,
        run_id: str,
        call_id: str,
        attempt: int,
        first_batch: float = FIRST_BATCH_SECONDS,
        listened_until: float | None = None,
    ) -> None:
        """Publish to run ``run_id`` of task ``task_id``, the first batch ``first_batch`` seconds
        after the first piece; ``start()`` begins. ``listened_until``: a reader's lease as the
        workflow knew it when it scheduled the call (epoch seconds; None: nobody listened then)."""
        self._handle = temporal.get_workflow_handle(task_id, run_id=run_id)
        self._id = secrets.token_hex(4)  # this publisher, for the workflow to drop a batch sent twice
        self._call_id, self._attempt = call_id, attempt
        self._pieces: list[tuple[str, str]] = []
        self._sent = 0  # pieces put into a batch
        self._unsent: list[dict[str, Any]] = []  # batches whose signal has not succeeded yet, in order
        self._listening = listened_until is not None and listened_until > time.time()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._first_piece = asyncio.Event()
        self._first_piece_at = 0.0
        self._first_batch = first_batch
        self.batches = 0
        """Batches published (each one signal in the task's history)."""

    def on_piece(self, kind: str, text: str) -> None:
        """Keep one piece (never waits: the provider's stream is not held up)."""
        if not self._pieces and self._loop is not None:
            self._first_piece_at = time.monotonic()
            self._loop.call_soon_threadsafe(self._first_piece.set)  # a provider may stream from a thread
        self._pieces.append((kind, text))

    def start(self) -> None:
        """Start watching for a listener and publishing (on the running loop)."""
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="noeta-delta-stream")

    async def aclose(self, publish_rest: bool = True) -> None:
        """The call ended: publish what is left if someone listens (bounded; not with
        ``publish_rest=False``), then stop. An attempt that streamed nothing (a 429, a refused
        request) asks nothing: each question is a query through the task's workflow worker, and a
        burst of refused attempts asking was seconds of waiting on a busy worker."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 (streaming is best effort)
                pass
        if not publish_rest or len(self._pieces) == self._sent:
            return
        # Asked before the call returns: a short task's last call may be its end, after which the
        # run takes no signal and a reader that came during the call would get nothing.
        if self._listening or await self._someone_listens():
            try:
                async with asyncio.timeout(FINAL_FLUSH_SECONDS):
                    await self._publish()
            except (RPCError, TimeoutError) as err:
                logger.warning("the last pieces of %s could not be published: %s", self._call_id, err)

    async def _run(self) -> None:
        # A reader that listened when the call was scheduled is known from the call's input; others
        # are asked for once the call has lasted LISTEN_CHECK_SECONDS (most calls nobody reads are
        # over by then and never ask: the query is a round trip through the workflow's worker).
        while not self._listening:
            await asyncio.sleep(LISTEN_CHECK_SECONDS)
            self._listening = await self._someone_listens()
        await self._first_piece.wait()
        await asyncio.sleep(max(0.0, self._first_piece_at + self._first_batch - time.monotonic()))
        while True:
            try:
                await self._publish()
            except (RPCError, TimeoutError) as err:  # kept; sent again with the next batch
                logger.debug("publishing pieces of %s failed: %s", self._call_id, err)
            await asyncio.sleep(BATCH_SECONDS)

    async def _someone_listens(self) -> bool:
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 an answer that arrives together with a
            # cancellation (the call ending: aclose) made wait_for return it and drop the
            # cancellation, and the model call waited for this loop until its attempt timed out.
            async with asyncio.timeout(LISTEN_QUERY_SECONDS):
                until = await self._handle.query(QUERY_STREAM_LISTENING, result_type=float)
        except (RPCError, Exception) as err:  # noqa: BLE001 (an older workflow has no such query)
            logger.debug("cannot ask whether someone listens to %s: %s", self._handle.id, err)
            return False
        return bool(until > time.time())

    async def _publish(self) -> None:
        pieces = self._pieces[self._sent:]
        if pieces:
            self.batches += 1
            self._unsent.append(batch_body(self._id, self.batches, self._call_id, self._attempt, self._sent, pieces))
            self._sent += len(pieces)
        # A batch whose signal failed is sent again as it was (it may have landed: the workflow
        # drops a batch number it has), before any later one.
        while self._unsent:
            await self._handle.signal(SIGNAL_STREAM_BATCH, self._unsent[0])
            del self._unsent[0]


async def read_task_stream(
    temporal: Client, task_id: str, after: int | None = None, poll_seconds: float = POLL_SECONDS
) -> AsyncIterator[StreamDelta]:
    """Every delta of ``task_id``'s stream after offset ``after`` (None: from the oldest retained,
    the current call's first piece), in order, until the task has ended and the stream is read to
    its end. Waits for a task that does not exist yet. Reads one run at a time: a run that
    continued as new is read to its end before the next one (offsets go on across runs)."""
    latest = temporal.get_workflow_handle(task_id)
    offset = 0 if after is None else after + 1
    renew_at = end_check_at = 0.0
    idle = 0  # polls in a row that brought nothing
    run: Any = None  # the handle of the run being read
    while True:
        now = time.monotonic()
        if now >= renew_at:
            renew_at = now + (LISTEN_LEASE_SECONDS / 2 if await _listen(latest) else poll_seconds)
        if run is None:
            run_id = await _run_id(latest)
            if run_id is None:  # not started yet
                await asyncio.sleep(poll_seconds)
                continue
            run = temporal.get_workflow_handle(task_id, run_id=run_id)
        result = await _poll(run, offset)
        if result is None:  # no answer (no worker yet, or the run's worker is gone)
            status = await _status(run)
            if status is not None and status != WorkflowExecutionStatus.RUNNING:
                if status != WorkflowExecutionStatus.CONTINUED_AS_NEW:
                    return  # an ended task whose stream cannot be read any more: done
                run = await _next_run(temporal, run)
            await asyncio.sleep(poll_seconds)
            continue
        for item in result.items:
            for delta in batch_deltas(task_id, _payload(item.data), item.offset):
                yield delta
        offset = max(offset, result.next_offset)
        idle = 0 if result.items else idle + 1
        if result.more_ready:
            continue
        if now >= end_check_at:  # once a second: has the run ended? Then read its rest, and go on.
            end_check_at = now + 1.0
            status = await _status(run)
            if status is not None and status != WorkflowExecutionStatus.RUNNING:
                while (rest := await _poll(run, offset)) is not None:  # one answer holds at most ~1 MB
                    for item in rest.items:
                        for delta in batch_deltas(task_id, _payload(item.data), item.offset):
                            yield delta
                        offset = max(offset, item.offset + 1)
                    offset = max(offset, rest.next_offset)
                    if not rest.more_ready or not rest.items:
                        break
                if status != WorkflowExecutionStatus.CONTINUED_AS_NEW:
                    return
                run = await _next_run(temporal, run)  # the very next run, even if it too has ended
                continue
        await asyncio.sleep(min(poll_seconds * 2 ** min(idle, 8), max(poll_seconds, IDLE_POLL_SECONDS)))


async def _poll(run: Any, offset: int) -> PollResult | None:
    try:
        result: PollResult = await run.query(WORKFLOW_STREAM_POLL, PollInput(from_offset=offset), result_type=PollResult)
        return result
    except (RPCError, WorkflowQueryFailedError) as err:
        logger.debug("cannot read the delta stream of %s yet: %s", run.id, err)
        return None


async def _next_run(temporal: Client, run: Any) -> Any:
    """The run ``run`` continued as new into (its close event names it); None: the latest."""
    try:
        async for event in run.fetch_history_events(event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT):
            next_id = event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if next_id:
                return temporal.get_workflow_handle(run.id, run_id=next_id)
    except RPCError as err:
        logger.debug("cannot find the run after %s: %s", run.run_id, err)
    return None


async def _run_id(handle: Any) -> str | None:
    try:
        return str((await handle.describe()).run_id)
    except RPCError:
        return None


async def _status(run: Any) -> WorkflowExecutionStatus | None:
    try:
        status: WorkflowExecutionStatus | None = (await run.describe()).status
        return status
    except RPCError:
        return None


def _payload(wire: str) -> Payload:
    payload = Payload()
    try:
        payload.ParseFromString(base64.b64decode(wire))
    except Exception:  # noqa: BLE001 (unreadable: batch_deltas reports it)
        pass
    return payload


async def _listen(handle: Any) -> bool:
    try:
        await handle.signal(SIGNAL_STREAM_LISTEN, LISTEN_LEASE_SECONDS)
        return True
    except RPCError:  # not started yet, or ended: read what there is
        return False


__all__ = ["BATCH_SECONDS", "FIRST_BATCH_SECONDS", "CallPublisher", "batch_deltas", "read_task_stream"]
