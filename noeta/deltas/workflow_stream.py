"""Publishing a model call's pieces to the task's workflow stream (Temporal's Workflow Streams,
hosted by the task's workflow, :mod:`noeta.workflows.streams`).

:class:`CallPublisher`, in the model-call activity, sends the pieces in batches, each one
``noeta.stream_batch`` signal with a compact JSON argument (:mod:`noeta.protocols.stream_batches`),
whether or not anyone reads them: a batch is recorded in the task's history, which is what readers
read (``noeta.client.stream_reader``), so a reader needs no worker, joins at any time, gets every
piece of every call, and writes nothing. The last batch of an attempt carries its end mark.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from noeta.protocols.names import SIGNAL_STREAM_BATCH
from noeta.protocols.stream_batches import CallPieces, batch_body

logger = logging.getLogger(__name__)

#: Seconds from a call's first piece to its first batch (a worker's NOETA_STREAM_FIRST_BATCH); later
#: batches go BATCH_SECONDS apart and the rest, with the end mark, when the call ends. Each batch
#: costs ~470 bytes of history besides its text (its signal and the workflow task it causes), so a
#: call shorter than the first wait costs one batch.
FIRST_BATCH_SECONDS = 1.5
BATCH_SECONDS = 2.0
#: Longest the end of a call waits for its last batch to be taken (the model call never fails for it).
FINAL_FLUSH_SECONDS = 10.0


class CallPublisher:
    """Publishes one model call attempt's pieces to its task's stream, in batches."""

    def __init__(
        self, temporal: Client, task_id: str, run_id: str, call_id: str, attempt: int, first_batch: float = FIRST_BATCH_SECONDS
    ) -> None:
        """Publish to run ``run_id`` of task ``task_id``, the first batch ``first_batch`` seconds
        after the first piece; ``start()`` begins."""
        self._handle = temporal.get_workflow_handle(task_id, run_id=run_id)
        self._id = secrets.token_hex(4)  # this publisher, for the workflow to drop a batch sent twice
        self._call_id, self._attempt = call_id, attempt
        self._pieces: list[tuple[str, str]] = []
        self._sent = 0  # pieces put into a batch
        self._unsent: list[dict[str, Any]] = []  # batches whose signal has not succeeded yet, in order
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
        """Start publishing (on the running loop)."""
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="noeta-delta-stream")

    async def aclose(self, publish_rest: bool = True) -> None:
        """The call ended: publish what is left with the end mark (bounded; not with
        ``publish_rest=False``: a cancelled call stops at once), then stop. An attempt that
        streamed nothing (a 429, a refused request) publishes nothing."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 (streaming is best effort)
                pass
        if not publish_rest or not self._pieces:
            return
        # Before the call returns: every batch is in history before the call's result, so a reader
        # that has read history up to the answer has every piece of it.
        try:
            async with asyncio.timeout(FINAL_FLUSH_SECONDS):
                await self._publish(end=True)
        except (RPCError, TimeoutError) as err:
            logger.warning(
                "the last pieces of %s (attempt %d) of task %s could not be published, so its readers "
                "get no end mark for it: %s", self._call_id, self._attempt, self._handle.id, err,
            )

    async def _run(self) -> None:
        await self._first_piece.wait()
        await asyncio.sleep(max(0.0, self._first_piece_at + self._first_batch - time.monotonic()))
        while True:
            try:
                await self._publish(end=False)
            except (RPCError, TimeoutError) as err:  # kept; sent again with the next batch
                logger.debug("publishing pieces of %s failed: %s", self._call_id, err)
            await asyncio.sleep(BATCH_SECONDS)

    async def _publish(self, end: bool) -> None:
        pieces = self._pieces[self._sent:]
        if end and not pieces:
            # Every piece went out before the call ended (rare: the end follows the last piece by
            # milliseconds): the end mark needs a piece to travel on, an empty one, the next seq.
            pieces = [("text", "")]
        if pieces:
            self.batches += 1
            call = CallPieces(self._call_id, self._attempt, self._sent, pieces, end=end)
            self._unsent.append(batch_body(self._id, self.batches, call))
            self._sent += len(pieces)
        # A batch whose signal failed is sent again as it was (it may have landed: the workflow
        # drops a batch number it has), before any later one.
        while self._unsent:
            await self._handle.signal(SIGNAL_STREAM_BATCH, self._unsent[0])
            del self._unsent[0]


__all__ = ["BATCH_SECONDS", "FIRST_BATCH_SECONDS", "CallPublisher"]
