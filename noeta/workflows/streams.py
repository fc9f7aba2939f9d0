"""The task's delta stream: Temporal's Workflow Streams (``temporalio.contrib.workflow_streams``)
hosted by the task's workflow.

The model-call activity publishes batches of pieces (one stream item per batch) with the
``noeta.stream_batch`` signal (compact JSON, :mod:`noeta.protocols.stream_batches`; the stream's own
publish signal, which older activities sent, is still handled). Readers read the batches from the
task's history (``noeta.client.stream_reader``), which is why a reader needs no worker and writes
nothing. The stream's poll query still serves the items kept here: those of the current call and
of the one before it, with offsets that keep growing across continue-as-new (the next offset travels
in the Carry) and that are the same as a history reader's.

Readers of an earlier release signalled ``noeta.stream_listen`` (and activities of that release
queried ``noeta.stream_listening``) so that calls were published only while someone listened; the
handlers stay so that histories holding those signals replay and such readers are not refused.

Nothing here issues a command: a task's commands are the same with or without its stream.
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
from noeta.protocols.stream_batches import SeenBatches, checked_batch, item_json

#: Longest an (earlier release's) reader's listen signal counts, in seconds.
MAX_LISTEN_SECONDS = 3600.0
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
        self._seen = SeenBatches()
        # Our own publish handlers: they keep the log to the last two calls and count the offset.
        workflow.set_signal_handler(SIGNAL_STREAM_BATCH, self._batch)
        workflow.set_signal_handler(WORKFLOW_STREAM_PUBLISH, self._publish)
        workflow.set_signal_handler(SIGNAL_STREAM_LISTEN, self._listen)
        workflow.set_query_handler(QUERY_STREAM_LISTENING, self._listening)

    def _batch(self, body: Any) -> None:
        batch = checked_batch(body)
        if batch is None:  # bad input is data: dropped, never a failed workflow task
            return
        publisher, number, call = batch
        if self._seen.first_time(publisher, number):
            self._append(f"{call.call_id}#{call.attempt}", Payload(metadata=_JSON, data=item_json(call)))
        self._state.stream_offset = self._end

    def _publish(self, batch: PublishInput) -> None:
        """The stream's own publish signal (what activities sent before ``noeta.stream_batch``)."""
        if not self._seen.first_time(batch.publisher_id, batch.sequence):
            return
        for entry in batch.items:
            payload = Payload()
            try:
                payload.ParseFromString(base64.b64decode(entry.data))
            except Exception:  # noqa: BLE001 (a malformed entry is dropped: it must not fail the workflow task)
                continue
            self._append(entry.topic, payload)
        self._state.stream_offset = self._end

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
