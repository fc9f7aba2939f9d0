"""The connection every part of the client shares: the Temporal client, what the cluster supports
(Noeta's search attributes, payload encryption), and finding out whether a task exists and runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.visibility import registered_search_attributes, tenant_of
from noeta.errors import NoetaError, TaskNotFoundError, TaskNotOpenError
from noeta.protocols.names import BASE_SEARCH_ATTRIBUTES, SUBTASK_SEPARATOR


class ActingClient(TemporalClient):
    """The same connection as another Temporal client, sending ``identity`` as the caller identity
    of its requests (Temporal records it in the task's history: who started, signalled, updated,
    cancelled). Shares the connection, the data converter and the interceptors; costs no RPC."""

    def __init__(self, base: TemporalClient, identity: str) -> None:
        """A client like ``base`` that acts as ``identity``."""
        self._acting_as = identity
        super().__init__(**base.config())

    @property
    def identity(self) -> str:
        """The identity this client's requests carry."""
        return self._acting_as


#: Most acting clients a connection keeps (one per identity that acted recently).
MAX_ACTING_CLIENTS = 256
#: Most task queues a connection remembers of the tasks its client started (the newest).
MAX_REMEMBERED_QUEUES = 10_000


class Connection:
    """A Temporal client and what the client side learns about its cluster and tasks."""

    def __init__(self, temporal: TemporalClient) -> None:
        """``temporal``: the connected Temporal client every part of AsyncClient uses."""
        self.temporal = temporal
        # Noeta's search attributes the cluster has registered: asked once, on first need.
        self._registered: set[str] | None = None
        self._acting: dict[str, TemporalClient] = {}
        self._started_on: dict[str, str] = {}

    def started(self, task_id: str, task_queue: str) -> None:
        """Remember the queue a task this client started was started on: a wait for it can then
        ask about the queue, which every wait on it shares, before asking about the task."""
        if len(self._started_on) >= MAX_REMEMBERED_QUEUES and task_id not in self._started_on:
            self._started_on.pop(next(iter(self._started_on)))
        self._started_on[task_id] = task_queue

    def started_on(self, task_id: str) -> str | None:
        """The queue this client started the task on (None: not started here, or long ago)."""
        return self._started_on.get(task_id)

    def acting_as(self, identity: str | None) -> TemporalClient:
        """The Temporal client whose requests carry ``identity`` (None: this connection's own)."""
        if not identity or identity == self.temporal.identity:
            return self.temporal
        client = self._acting.get(identity)
        if client is None:
            if len(self._acting) >= MAX_ACTING_CLIENTS:
                self._acting.pop(next(iter(self._acting)))
            client = self._acting[identity] = ActingClient(self.temporal, identity)
        return client

    @property
    def namespace(self) -> str:
        """The Temporal namespace the tasks live in."""
        return self.temporal.namespace

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

    async def describe(self, task_id: str) -> WorkflowExecutionDescription:
        """The task's workflow as the server describes it (TaskNotFoundError when there is none)."""
        try:
            return await self.temporal.get_workflow_handle(task_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise TaskNotFoundError(f"no task {task_id!r}") from err
            raise

    async def tenant_of(self, task_id: str) -> str:
        """The tenant the task belongs to (a sub-agent: its root task's); TaskNotFoundError when
        there is no such task."""
        root = task_id.split(SUBTASK_SEPARATOR, 1)[0]
        if root != task_id:
            await self.describe(task_id)  # the sub-agent must exist too
        return tenant_of((await self.describe(root)).typed_search_attributes)

    async def is_running(self, task_id: str) -> bool:
        """Whether the task's workflow runs now (TaskNotFoundError when there is none)."""
        return (await self.describe(task_id)).status == WorkflowExecutionStatus.RUNNING

    async def ended_or_missing(self, task_id: str) -> NoetaError:
        """The error for a call a task could not take: it does not exist, or it has ended."""
        try:
            desc = await self.describe(task_id)
        except TaskNotFoundError as err:
            return err
        if desc.status == WorkflowExecutionStatus.RUNNING:
            return TaskNotOpenError(f"task {task_id!r} does not take this call now")
        return TaskNotOpenError(f"task {task_id!r} has ended ({desc.status.name.lower() if desc.status else 'closed'})")

    async def require_running(self, task_id: str) -> None:
        """Raise the task's typed error unless it runs now."""
        if not await self.is_running(task_id):
            raise await self.ended_or_missing(task_id)

    @contextlib.asynccontextmanager
    async def reaching(self, task_id: str) -> AsyncIterator[None]:
        """Around a call to a task: the server's "not found" becomes the task's typed error (it
        does not exist, or it has ended)."""
        try:
            yield
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise await self.ended_or_missing(task_id) from err
            raise
