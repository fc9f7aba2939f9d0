"""Reading a task's event log: all runs of the workflow, optionally live.

``EventStream`` is what ``AsyncClient.events`` returns: ``await`` it for a list, or ``async for``
over it; with ``follow=True`` it long-polls history and yields envelopes as they happen, ending
when the task ends (following continue-as-new into the next run).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client as TemporalClient
from temporalio.converter import PayloadCodec
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.projection import Projector
from noeta.errors import EncryptionKeyError, TaskNotFoundError
from noeta.protocols.event_log import EventEnvelope, Observer
from noeta.security.history_codec import decode_message

logger = logging.getLogger(__name__)


async def first_run_id(temporal: TemporalClient, task_id: str) -> str:
    """The run that started the task (continue-as-new keeps the task id, not the run id)."""
    handle = temporal.get_workflow_handle(task_id)
    try:
        async for event in handle.fetch_history_events(page_size=1):
            return event.workflow_execution_started_event_attributes.first_execution_run_id
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise TaskNotFoundError(f"no task {task_id!r}") from err
        raise
    raise TaskNotFoundError(f"no task {task_id!r}")


async def decode_event(event: HistoryEvent, codec: PayloadCodec) -> None:
    """Decode ``event``'s payloads in place with ``codec``; EncryptionKeyError for a key this
    client lacks, except on a failed workflow task: a worker with other keys reported why it
    could not run the task (sealed with its own key), and the parts in the clear still say so
    (noeta.client.projection.stalls)."""
    try:
        await decode_message(event, codec)
    except EncryptionKeyError:
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            raise


async def history_events(
    temporal: TemporalClient, task_id: str, follow: bool = False
) -> AsyncIterator[tuple[int, HistoryEvent]]:
    """(run number, event) for every run of the task in order; live when ``follow``. Payloads are
    decoded with the client's codec (encrypted tasks), if it has one."""
    codec = temporal.data_converter.payload_codec
    run_id: str | None = await first_run_id(temporal, task_id)
    run = 0
    while run_id:
        handle = temporal.get_workflow_handle(task_id, run_id=run_id)
        next_run = None
        async for event in handle.fetch_history_events(wait_new_event=follow):
            if codec is not None:
                await decode_event(event, codec)
            yield run, event
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                next_run = event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        run_id, run = next_run, run + 1


async def history_runs(temporal: TemporalClient, task_id: str) -> list[list[HistoryEvent]]:
    """The task's history events as one list per run (continue-as-new starts the next), payloads
    decoded as :func:`history_events` does. TaskNotFoundError for an unknown task."""
    runs: list[list[HistoryEvent]] = []
    current = -1
    async for run, event in history_events(temporal, task_id):
        if run != current:
            runs.append([])
            current = run
        runs[-1].append(event)
    return runs


class EventStream:
    """A task's envelopes after ``after_seq``: awaitable (a list) and async-iterable."""

    def __init__(self, temporal: TemporalClient, task_id: str, after_seq: int = 0, follow: bool = False) -> None:
        """``after_seq``: only envelopes with a larger seq; ``follow``: wait for new ones until the task ends.
        """
        self.temporal, self.task_id, self.after_seq, self.follow = temporal, task_id, after_seq, follow

    async def __aiter__(self) -> AsyncIterator[EventEnvelope]:
        """Yield the envelopes one by one as the history is read."""
        projector = Projector(task_id=self.task_id)
        current = -1
        async for run, event in history_events(self.temporal, self.task_id, self.follow):
            if run != current:
                projector.begin_run()
                current = run
            for env in projector.feed(event):
                if env.seq > self.after_seq:
                    yield env
        for env in projector.settle():
            if env.seq > self.after_seq:
                yield env

    async def _collect(self) -> list[EventEnvelope]:
        return [env async for env in self]

    def __await__(self) -> Generator[Any, None, list[EventEnvelope]]:
        """Await the stream: every envelope, as a list."""
        return self._collect().__await__()


async def notify(stream: EventStream, observers: Sequence[Observer | Callable[[EventEnvelope], Awaitable[None]]]) -> int:
    """Call every observer once per envelope, in order; an observer's error is logged, not raised
    (an observer watches, it cannot change the task). Returns the number of envelopes seen."""
    count = 0
    async for env in stream:
        count += 1
        for observer in observers:
            try:
                result = observer(env)
                if hasattr(result, "__await__"):
                    await result  # type: ignore[misc]
            except Exception:
                logger.exception("observer %r failed on envelope %s (%s)", observer, env.seq, env.type)
    return count
