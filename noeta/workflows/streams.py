"""The task's delta stream: Temporal's Workflow Streams (``temporalio.contrib.workflow_streams``)
hosted by the task's workflow, so any client reads a model call's streamed pieces through Temporal
alone, from an offset.

The model-call activity publishes batches of pieces (one stream item per batch) with the
``noeta.stream_batch`` signal (compact JSON, :mod:`noeta.protocols.stream_batches`; the stream's own
publish signal, which older activities sent, is still handled), and only while someone listens: a reader signals ``noeta.stream_listen`` with the
seconds it will listen, and the activity asks ``noeta.stream_listening`` before it publishes. The
log keeps the pieces of the current call and of the one before it (a late reader gets every piece
of the current call; history keeps the final responses), and its offsets keep growing across
continue-as-new (the next offset and the readers' lease travel in the Carry).

Nothing here issues a command: tasks nobody listens to have the same history and commands as
before, and a listened-to task's history only gains the signals.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import PublishInput, WorkflowStream, WorkflowStreamState

from noeta.protocols.names import (
    QUERY_STREAM_LISTENING,
    SIGNAL_STREAM_BATCH,
    SIGNAL_STREAM_LISTEN,
    WORKFLOW_STREAM_PUBLISH,
)
from noeta.protocols.run_state import Carry
from noeta.protocols.stream_batches import checked_batch, item_json

#: Longest a reader's listen signal counts (seconds); readers renew it well before.
MAX_LISTEN_SECONDS = 3600.0
#: Publishers whose last batch number is remembered (each model-call attempt is one publisher).
_PUBLISHERS_KEPT = 32
_JSON = {"encoding": b"json/plain"}


class TaskStream:
    """The workflow side of the task's delta stream; built once, in the workflow's ``__init__``."""

    def __init__(self, state: Carry) -> None:
        """Register the stream's handlers on the running workflow; offsets continue from
        ``state.stream_offset`` (a continued run's)."""
        self._state = state
        prior = WorkflowStreamState(base_offset=state.stream_offset) if state.stream_offset else None
        self._stream = WorkflowStream(prior)  # registers the poll update and queries (no command)
        self._end = state.stream_offset
        self._call = ""  # the topic (model call and attempt) of the last piece
        self._call_start = state.stream_offset
        self._batches: dict[str, int] = {}
        # Our own publish handlers: they keep the log to the last two calls and count the offset.
        workflow.set_signal_handler(SIGNAL_STREAM_BATCH, self._batch)
        workflow.set_signal_handler(WORKFLOW_STREAM_PUBLISH, self._publish)
        workflow.set_signal_handler(SIGNAL_STREAM_LISTEN, self._listen)
        workflow.set_query_handler(QUERY_STREAM_LISTENING, self._listening)

    def _batch(self, body: Any) -> None:
        batch = checked_batch(body)
        if batch is None:  # bad input is data: dropped, never a failed workflow task
            return
        publisher, number, call_id, attempt, first_seq, pieces = batch
        if self._first_time(publisher, number):
            self._append(f"{call_id}#{attempt}", Payload(metadata=_JSON, data=item_json(call_id, attempt, first_seq, pieces)))
        self._state.stream_offset = self._end

    def _publish(self, batch: PublishInput) -> None:
        """The stream's own publish signal (what activities sent before ``noeta.stream_batch``)."""
        if not self._first_time(batch.publisher_id, batch.sequence):
            return
        for entry in batch.items:
            payload = Payload()
            try:
                payload.ParseFromString(base64.b64decode(entry.data))
            except Exception:  # noqa: BLE001 (a malformed entry is dropped: it must not fail the workflow task)
                continue
            self._append(entry.topic, payload)
        self._state.stream_offset = self._end

    def _first_time(self, publisher: str, number: int) -> bool:
        """False for a publisher's batch that already landed (its signal was sent again)."""
        if not publisher:
            return True
        last = self._batches.get(publisher)
        if last is not None and number <= last:
            return False
        self._batches.pop(publisher, None)
        self._batches[publisher] = number
        while len(self._batches) > _PUBLISHERS_KEPT:
            del self._batches[next(iter(self._batches))]
        return True

    def _append(self, topic: str, payload: Payload) -> None:
        if topic != self._call:  # a new call or attempt: drop what came before the last one
            self._stream.truncate(self._call_start)
            self._call, self._call_start = topic, self._end
        self._stream.topic(topic).publish(payload)
        self._end += 1

    def _listen(self, seconds: float) -> None:
        if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
            return  # bad input is data: ignored, never a failed workflow task
        until = workflow.now().timestamp() + max(0.0, min(float(seconds), MAX_LISTEN_SECONDS))
        self._state.stream_listened_until = max(self._state.stream_listened_until, until)

    def _listening(self) -> float:
        return self._state.stream_listened_until


__all__ = ["MAX_LISTEN_SECONDS", "TaskStream"]
