"""What every part of the client shares: the connection and its settings, and finding out whether a
task exists and runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.embedded import EmbeddedServer
from noeta.client.events import EventStream, notify
from noeta.client.visibility import registered_search_attributes
from noeta.context.content_store import ContentStore
from noeta.deltas.broker import DeltaBroker, Subscription, in_process_broker
from noeta.errors import NoetaError, TaskNotFoundError, TaskNotOpenError
from noeta.protocols.event_log import Observer
from noeta.protocols.names import BASE_SEARCH_ATTRIBUTES


class ClientBase:
    """The state of an :class:`~noeta.client.client.AsyncClient` and the checks its operations share."""

    def __init__(
        self,
        temporal: TemporalClient,
        *,
        content_store: ContentStore,
        task_queue: str,
        server: EmbeddedServer | None = None,
        observers: Sequence[Observer] = (),
        memory: Any = None,
        delta_broker: DeltaBroker | None = None,
    ) -> None:
        self.temporal = temporal
        self.observers = list(observers)
        """Called with every envelope of every task this client starts."""
        self._observing: dict[str, asyncio.Task[int]] = {}
        self.content_store = content_store
        self.task_queue = task_queue
        self.server = server
        """The embedded dev server, when this client uses one."""
        self.memory = memory
        """The memory pool (a MemoryStore) that the memory tool of this host's workers shares:
        seed it, read what agents remembered."""
        self.delta_broker: DeltaBroker = delta_broker or in_process_broker()
        """Where the workers' streamed deltas arrive (``NOETA_DELTA_BROKER``)."""
        self._delta_subscription: Subscription | None = None
        self.indexed_metadata: tuple[str, ...] = ()
        """``Options.metadata`` keys that tasks started here make searchable."""
        self.ui_url: str | None = server.ui_url if server is not None else None
        """The Temporal UI's address, for task links (``task_url``)."""
        self._registered: set[str] | None = None

    @property
    def encrypted(self) -> bool:
        """Whether payloads go through a codec (then the goal is not put in a search attribute:
        visibility stores those in plain text)."""
        return self.temporal.data_converter.payload_codec is not None

    async def registered_attributes(self) -> set[str]:
        """Noeta's search attributes the cluster has registered (asked once)."""
        if self._registered is None:
            self._registered = await registered_search_attributes(self.temporal)
        return self._registered

    async def indexed(self) -> bool:
        """Whether the cluster has Noeta's search attributes registered (checked once)."""
        return set(BASE_SEARCH_ATTRIBUTES) <= await self.registered_attributes()

    async def has_attribute(self, name: str) -> bool:
        """Whether the cluster has this one of Noeta's search attributes (checked once)."""
        return name in await self.registered_attributes()

    async def is_running(self, task_id: str) -> bool:
        return (await self._describe(task_id)).status == WorkflowExecutionStatus.RUNNING

    async def _describe(self, task_id: str) -> WorkflowExecutionDescription:
        try:
            return await self.temporal.get_workflow_handle(task_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise TaskNotFoundError(f"no task {task_id!r}") from err
            raise

    async def _ended_or_missing(self, task_id: str) -> NoetaError:
        """The error for a call a task could not take: it does not exist, or it has ended."""
        try:
            desc = await self._describe(task_id)
        except TaskNotFoundError as err:
            return err
        if desc.status == WorkflowExecutionStatus.RUNNING:
            return TaskNotOpenError(f"task {task_id!r} does not take this call now")
        return TaskNotOpenError(f"task {task_id!r} has ended ({desc.status.name.lower() if desc.status else 'closed'})")

    async def _require_running(self, task_id: str) -> None:
        if (await self._describe(task_id)).status != WorkflowExecutionStatus.RUNNING:
            raise await self._ended_or_missing(task_id)

    @contextlib.asynccontextmanager
    async def _reaching(self, task_id: str) -> AsyncIterator[None]:
        """Around a call to a task: the server's "not found" becomes the task's typed error (it
        does not exist, or it has ended)."""
        try:
            yield
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise await self._ended_or_missing(task_id) from err
            raise

    def events(self, task_id: str, after_seq: int = 0, follow: bool = False) -> EventStream:
        """The task's event log, projected from its workflow history: ``await`` it for a list, or
        ``async for`` over it; ``follow=True`` yields envelopes live until the task ends."""
        return EventStream(self.temporal, task_id, after_seq=after_seq, follow=follow)

    async def observe(self, task_id: str, observers: Sequence[Observer], after_seq: int = 0) -> int:
        """Call each observer once per envelope, in order, until the task ends."""
        return await notify(self.events(task_id, after_seq=after_seq, follow=True), observers)
