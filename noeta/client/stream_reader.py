"""Reading a task's delta stream from its history: the batches its model calls published
(``noeta.stream_batch`` signals, :mod:`noeta.deltas.workflow_stream`) are events of the task's
history, so a reader follows history (a long poll) and needs nothing else: no worker (the stream of
a task whose worker has stopped reads the same), no signal or update (a reader writes nothing into
the task's history) and no query (which a worker would have to answer).

Offsets are the workflow's own (:mod:`noeta.workflows.streams`): one per batch the workflow took,
counted from the task's first run across continue-as-new, a batch sent twice counted once. Every
batch of every call is in history, so a reader that joins late, even after the task ended, gets
every piece.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client as TemporalClient

from noeta.client.events import first_run_id, history_events
from noeta.errors import TaskNotFoundError
from noeta.protocols.messages import StreamDelta
from noeta.protocols.names import SIGNAL_STREAM_BATCH, WORKFLOW_STREAM_PUBLISH
from noeta.protocols.stream_batches import CallPieces, SeenBatches, checked_batch, item_pieces
from noeta.security.codec import refuse_sealed

logger = logging.getLogger(__name__)

#: How often a reader looks again for a task that does not exist yet (doubling up to a second).
WAIT_FOR_TASK_SECONDS = 0.2


@dataclass
class ReadProgress:
    """How far a read of a task's history has got, kept across the read's restarts: the runs read
    to their end, and in each run the last event whose pieces were all taken."""

    events: dict[str, int] = field(default_factory=dict)
    """Run id -> the id of its last event handled."""
    closed_runs: set[str] = field(default_factory=set)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set (and cleared by a waiter) whenever the read moves on."""
    last_error: str | None = None
    """Why the read last failed (it starts again after the last piece taken), if it did."""

    def reached(self, run_id: str, event_id: int) -> bool:
        """Whether every event of run ``run_id`` up to ``event_id`` has been handled."""
        return run_id in self.closed_runs or self.events.get(run_id, 0) >= event_id

    def _moved(self, run_id: str, event_id: int, closed: bool) -> None:
        self.events[run_id] = max(self.events.get(run_id, 0), event_id)
        if closed:
            self.closed_runs.add(run_id)
        self.changed.set()


def call_deltas(task_id: str, call: CallPieces, offset: int) -> list[StreamDelta]:
    """The deltas of one stream item at ``offset`` (the last one marked ``final`` if it is the end)."""
    last = len(call.pieces) - 1
    return [
        StreamDelta(
            task_id=task_id, call_id=call.call_id, attempt=call.attempt, text=text, kind=kind,  # type: ignore[arg-type]
            seq=call.first_seq + i, offset=offset, final=call.end and i == last,
        )
        for i, (kind, text) in enumerate(call.pieces)
    ]


async def stream_items(
    temporal: TemporalClient, task_id: str, progress: ReadProgress | None = None
) -> AsyncIterator[tuple[int, CallPieces]]:
    """``(offset, pieces)`` for every item of ``task_id``'s stream, in order, from its first run,
    live until the task has ended (then the iteration ends). Waits for a task that does not exist
    yet. ``progress`` is moved on as events are handled (an event with pieces once the caller has
    asked for the next item)."""
    run_id = await _first_run(temporal, task_id)
    offset = 0
    seen = SeenBatches()
    async for _, event in history_events(temporal, task_id, follow=True):
        for call in _items(event, seen):
            yield offset, call
            offset += 1
        ends_run = event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        closes = ends_run or _closes(event)
        if progress is not None:
            progress._moved(run_id, event.event_id, closes)
        if ends_run:  # history_events goes on with the next run: so does the reader's bookkeeping
            run_id = event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            seen = SeenBatches()


async def _first_run(temporal: TemporalClient, task_id: str) -> str:
    wait = WAIT_FOR_TASK_SECONDS
    while True:
        try:
            return await first_run_id(temporal, task_id)
        except TaskNotFoundError:  # not started yet: a reader may come first
            await asyncio.sleep(wait)
            wait = min(1.0, wait * 2)


def _closes(event: HistoryEvent) -> bool:
    return event.event_type in (
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    )


def _items(event: HistoryEvent, seen: SeenBatches) -> list[CallPieces]:
    """The stream items a signal event adds, as the workflow takes them (bad input adds none)."""
    if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        return []
    signal = event.workflow_execution_signaled_event_attributes
    if signal.signal_name not in (SIGNAL_STREAM_BATCH, WORKFLOW_STREAM_PUBLISH) or not signal.input.payloads:
        return []
    body = _json(signal.input.payloads[0])
    if signal.signal_name == SIGNAL_STREAM_BATCH:
        batch = checked_batch(body)
        if batch is None or not seen.first_time(batch[0], batch[1]):
            return []
        return [batch[2]]
    return _published(body, seen)


def _published(body: object, seen: SeenBatches) -> list[CallPieces]:
    """The items of the stream's own publish signal (what activities sent before batches): one per
    entry, each a base64 Payload holding a stream item."""
    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
        return []
    publisher, number = body.get("publisher_id") or "", body.get("sequence") or 0
    if not isinstance(publisher, str) or not isinstance(number, int) or not seen.first_time(publisher, number):
        return []
    calls = []
    for entry in body["items"]:
        payload = Payload()
        try:
            payload.ParseFromString(base64.b64decode(entry["data"]))
        except Exception:  # noqa: BLE001 (the workflow drops an entry that is no payload; so does the reader)
            continue
        try:
            calls.append(item_pieces(payload.data))
        except (ValueError, KeyError, TypeError, IndexError):  # kept by the workflow: it takes an offset
            logger.warning("ignoring an unreadable stream item of a publish signal")
            calls.append(CallPieces("", 0, 0))
    return calls


def _json(payload: Payload) -> object:
    refuse_sealed(payload)  # EncryptionKeyError for a reader without the task's keys
    try:
        return json.loads(payload.data)
    except ValueError:
        return None


__all__ = ["ReadProgress", "call_deltas", "stream_items"]
