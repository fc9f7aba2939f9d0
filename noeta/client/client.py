"""Client: start tasks, send goals, read events and messages, wait for results, cancel.

:class:`AsyncClient` is the asyncio API; :class:`~noeta.client.sync.Client` is the same API for
synchronous code (it runs an AsyncClient on a private event-loop thread, so it imports this module,
not the other way round). Both talk to the embedded dev server unless ``TEMPORAL_ADDRESS`` points
at a cluster.

AsyncClient is composed of small objects, each owning the state it touches and handed its
collaborators: the :class:`~noeta.client.connection.Connection` (the Temporal client, what the
cluster supports, whether a task exists and runs), :class:`~noeta.client.start_methods.StartCalls`
(start and fork, by Options or by agent name), :class:`~noeta.client.schedule_methods.ScheduleCalls`,
:class:`~noeta.client.threads.ThreadCalls` (send), the :class:`~noeta.client.observation.Observation`
(the observers and their followers), :class:`~noeta.client.tasks.TaskOperations` (start, goals,
context, approvals, result, cancel), :class:`~noeta.client.listing.TaskListing` (list, UI links) and
:class:`~noeta.client.inspection.Inspection` (describe, details, pending approvals, history, events,
messages, audit). Its methods hand each call to the one that does it; a call a part serves whole
is that part's method, forwarded (:class:`~noeta.client.forwarding.Forwarded`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client as TemporalClient

from noeta.client.agents import Agents
from noeta.client.audit import AuditEntry
from noeta.client.connect import connect_temporal
from noeta.client.connection import Connection
from noeta.client.embedded import EmbeddedServer
from noeta.client.events import EventStream
from noeta.client.export import export_task
from noeta.client.forwarding import Forwarded, Shared
from noeta.client.imports import imported_export
from noeta.client.host import HostConfig
from noeta.client.inspection import METADATA_QUERY, ApprovalsInbox, Inspection, PendingApproval
from noeta.client.listing import TaskListing
from noeta.client.messages import ViewItem
from noeta.client.observation import Observation
from noeta.client.threads import ThreadCalls
from noeta.client.pollers import no_worker_message, unpolled_queue
from noeta.client.start_methods import StartCalls
from noeta.client.tasks import SERVER_OUTAGE_WAIT_SECONDS, SERVER_UNREACHABLE, TaskOperations
from noeta.client.schedule_methods import ScheduleCalls
from noeta.client.visibility import (
    TaskFilter, TaskInfo, TaskSummary, register_search_attributes, registered_search_attributes,
    search_attributes_registered,
)
from noeta.context.content_store import ContentStore
from noeta.client.deltas import ClientDeltas
from noeta.deltas.broker import DeltaBroker, DeltaStream, broker_for, in_process_broker
from noeta.protocols.event_log import Observer
from noeta.protocols.interaction import ApprovalRequest, TaskResult
from noeta.protocols.messages import ImageBlock, StreamDelta
from noeta.protocols.names import DEFAULT_PROVIDER
from noeta.protocols.statuses import IfBusy


class AsyncClient:
    """The asyncio API: starting tasks (:mod:`noeta.client.start_methods`), task operations
    (:mod:`noeta.client.tasks`), listing tasks (:mod:`noeta.client.listing`), reading tasks
    (:mod:`noeta.client.inspection`), following them for observers (:mod:`noeta.client.observation`),
    schedules of tasks (:mod:`noeta.client.schedule_methods`) and conversation threads
    (:mod:`noeta.client.threads`), on a connection (:mod:`noeta.client.connection`). Each is a part
    of the client; the calls a part serves whole are forwarded to it (:mod:`noeta.client.forwarding`)."""

    start = Forwarded("_starts", StartCalls.start)
    fork = Forwarded("_starts", StartCalls.fork)
    agent_options = Forwarded("_starts", StartCalls.agent_options)
    send = Forwarded("_threads", ThreadCalls.send)
    create_schedule = Forwarded("_schedules", ScheduleCalls.create_schedule)
    list_schedules = Forwarded("_schedules", ScheduleCalls.list_schedules)
    describe_schedule = Forwarded("_schedules", ScheduleCalls.describe_schedule)
    pause_schedule = Forwarded("_schedules", ScheduleCalls.pause_schedule)
    unpause_schedule = Forwarded("_schedules", ScheduleCalls.unpause_schedule)
    trigger_schedule = Forwarded("_schedules", ScheduleCalls.trigger_schedule)
    backfill_schedule = Forwarded("_schedules", ScheduleCalls.backfill_schedule)
    delete_schedule = Forwarded("_schedules", ScheduleCalls.delete_schedule)
    schedule_runs = Forwarded("_schedules", ScheduleCalls.schedule_runs)

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
        agents: Agents | str | None = None,
    ) -> None:
        """``temporal`` is the connected Temporal client; ``content_store`` must be the store the workers use;
        tasks go to ``task_queue`` unless a call says otherwise. ``connect`` builds all of these from a
        HostConfig. ``agents``: the agent catalog (or its ``package.module:attribute``) that
        ``start(goal, agent=...)`` resolves names in."""
        self._connection = Connection(temporal)
        self._observation = Observation(temporal, observers)
        self._tasks = TaskOperations(self._connection, self._observation, task_queue=task_queue)
        self._listing = TaskListing(self._connection, server.ui_url if server is not None else None)
        self._inspection = Inspection(
            self._connection, content_store=content_store, tasks=self._tasks, listing=self._listing
        )
        self.server = server
        """The embedded dev server, when this client uses one."""
        self.memory = memory
        """The memory pool (a MemoryStore) that the memory tool of this host's workers shares:
        seed it, read what agents remembered."""
        self._deltas = ClientDeltas(temporal, delta_broker or in_process_broker())
        self._starts = StartCalls(self._connection, self._inspection, self._tasks, self._deltas, agents)
        self._schedules = ScheduleCalls(self._connection, self._tasks, self._listing)
        self._threads = ThreadCalls(self._tasks, self._deltas)

    @classmethod
    async def connect(cls, host: HostConfig | None = None, observers: Sequence[Observer] = ()) -> AsyncClient:
        """Connect to the host's cluster (the embedded dev server when none is configured)."""
        host = host or HostConfig()
        temporal, server = await connect_temporal(host.settings, codec=host.codec, runtime=host.runtime)
        client = cls(
            temporal,
            content_store=host.store(),
            task_queue=host.task_queue or host.settings.task_queue,
            server=server,
            observers=observers,
            memory=host.settings.memory_store(),
            delta_broker=broker_for(host.settings.delta_broker_url),
            agents=host.settings.agents,  # NOETA_AGENTS, loaded when an agent is first started
        )
        client.indexed_metadata = host.settings.indexed_metadata
        client.ui_url = host.settings.temporal_ui or client.ui_url
        await client._deltas.open(host.delta_sink)  # the followed tasks' deltas, until close()
        return client

    # What the client was made with; each part holds its own.

    @property
    def temporal(self) -> TemporalClient:
        """The Temporal client."""
        return self._connection.temporal

    content_store = Shared[ContentStore](
        "_inspection", "content_store", "Where the bodies of the tasks' messages are (the workers' store)."
    )
    task_queue = Shared[str]("_tasks", "task_queue", "The queue tasks start on unless ``start`` names another.")
    agents = Shared[Agents | None, Agents | str | None](
        "_starts", "agents",
        """The agent catalog ``start(goal, agent="triage")`` resolves names in (None: none
        configured). Set it to an Agents, or to its ``package.module:attribute`` path.""",
    )
    observers = Shared[list[Observer], Sequence[Observer]](
        "_observation", "observers", "Called with every envelope of every task this client starts."
    )
    indexed_metadata = Shared[tuple[str, ...], Sequence[str]](
        "_tasks", "indexed_metadata", "``Options.metadata`` keys that tasks started here make searchable."
    )
    ui_url = Shared[str | None]("_listing", "ui_url", "The Temporal UI's address, for task links (``task_url``).")

    # The cluster and whether a task runs.

    @property
    def encrypted(self) -> bool:
        """Whether payloads go through a codec (then the goal is not put in a search attribute)."""
        return self._connection.encrypted

    async def registered_attributes(self) -> set[str]:
        """Noeta's search attributes the cluster has registered (asked once)."""
        return await self._connection.registered_attributes()

    async def indexed(self) -> bool:
        """Whether the cluster has Noeta's search attributes registered (checked once)."""
        return await self._connection.indexed()

    async def has_attribute(self, name: str) -> bool:
        """Whether the cluster has this one of Noeta's search attributes (checked once)."""
        return await self._connection.has_attribute(name)

    async def is_running(self, task_id: str) -> bool:
        """Whether the task runs now (TaskNotFoundError when there is no such task)."""
        return await self._connection.is_running(task_id)

    # Task operations.

    async def send_goal(
        self, task_id: str, goal: str, images: Sequence[ImageBlock] = (), *, identity: str | None = None,
        if_busy: IfBusy = "enqueue",
    ) -> TaskResult:
        """Send the next goal to a ``keep_open=True`` task; returns the result that answers it (as
        ``result`` does). ``if_busy``: "enqueue", "reject", "interrupt" or "steer" (docs/conversations.md)."""
        self._deltas.follow(task_id)
        return await self._deltas.settled(task_id, self._tasks.send_goal(task_id, goal, images, identity, if_busy))

    async def waiting_for_worker(self, task_id: str) -> str | None:
        """What to tell a user when the task runs and no worker polls its queue (which queue, how
        to start a worker); None when a worker polls it or the task has ended."""
        queue = await unpolled_queue(self.temporal, task_id)
        return None if queue is None else no_worker_message(task_id, queue)

    async def inject(self, task_id: str, text: str, origin: str = "system", *, identity: str | None = None) -> None:
        """Give the model host context at its next step (origin "system" or "memory"); it shows as
        an InjectedMessage, never as the user's words."""
        await self._tasks.inject(task_id, text, origin, identity)

    async def close_task(self, task_id: str, *, identity: str | None = None) -> None:
        """Let a keep-open task end after its queued goals."""
        await self._tasks.close_task(task_id, identity)

    async def approve(
        self,
        task_id: str,
        call_id: str,
        approved: bool = True,
        reason: str | None = None,
        approver: str | None = None,
        *, arguments: dict[str, Any] | None = None,
    ) -> None:
        """Answer an action that a guard sent for approval (``approved=False`` refuses it); the approver
        recorded is the update's caller identity, ``approver`` or this client's. ``arguments``:
        approve the tool call with these instead (checked by the guards again; both are recorded)."""
        await self._tasks.approve(task_id, call_id, approved, reason, approver, arguments)

    async def result(self, task_id: str) -> TaskResult:
        """Wait for the task's (last goal's) result; raises the task's typed error if it failed.
        While no worker polls the task's queue it says so (a warning on the ``noeta.client``
        logger, within seconds: which queue and how to start a worker) and keeps waiting.

        Keeps waiting through a Temporal outage of up to SERVER_OUTAGE_WAIT_SECONDS (the task goes
        on once the server is back); a longer one raises the RPCError. With a delta_sink it returns
        once the sink has every piece of the answer (as send_goal does), or warns what it may lack."""
        self._deltas.follow(task_id)
        return await self._deltas.settled(task_id, self._tasks.result(task_id))

    async def cancel(self, task_id: str, *, identity: str | None = None) -> None:
        """Cancel a running task (TaskNotOpenError once it has ended: Temporal would ignore it)."""
        await self._tasks.cancel(task_id, identity)

    # Listing and reading tasks.

    async def list_tasks(
        self,
        status: str | None = None,
        limit: int = 50,
        *,
        search: str | None = None,
        model: str | None = None,
        metadata: dict[str, str] | None = None,
        tenant: str | None = None,
    ) -> list[TaskSummary]:
        """Tasks on the cluster, newest first. ``status`` filters on NoetaStatus (or, without the search
        attributes, on the execution status); ``search`` matches words of the goal; ``model``,
        ``metadata`` (indexed keys) and ``tenant`` match exactly."""
        return await self._listing.list_tasks(TaskFilter(status, search, model, metadata, tenant), limit)

    def task_url(self, task_id: str) -> str | None:
        """The task's page in the Temporal UI (None when the UI's address is not known)."""
        return self._listing.task_url(task_id)

    async def describe(self, task_id: str) -> TaskInfo:
        """The task as it is now: its summary, and once it has ended its result or typed error."""
        return await self._inspection.describe(task_id)

    async def current_details(self, task_id: str) -> str:
        """What a running task is doing or waiting for (the Temporal UI's "Current Details"); a live
        worker answers, so this waits for one. Empty for a task that has ended."""
        return await self._inspection.current_details(task_id)

    async def approvals_waiting(self, limit: int = 100, *, tenant: str | None = None) -> ApprovalsInbox:
        """Every action waiting for a human (of ``tenant``), across the tasks whose status is
        awaiting_approval, the longest-waiting first; ``.unreadable`` names the tasks left out."""
        return await self._inspection.approvals_waiting(limit, tenant)

    async def pending_approvals(self, task_id: str) -> list[ApprovalRequest]:
        """Actions of a running task waiting for a human (asks the live workflow); none once the
        task has ended."""
        return await self._inspection.pending_approvals(task_id)

    async def audit(self, task_id: str) -> list[AuditEntry]:
        """Who did what to the task, when, as which identity (:mod:`noeta.client.audit`)."""
        return await self._inspection.audit(task_id)
    async def history(self, task_id: str) -> list[HistoryEvent]:
        """The raw history events of every run of the task, in order."""
        return await self._inspection.history(task_id)

    def events(self, task_id: str, after_seq: int = 0, follow: bool = False) -> EventStream:
        """The task's event log, projected from its workflow history: ``await`` it for a list, or
        ``async for`` over it; ``follow=True`` yields envelopes live until the task ends."""
        return self._inspection.events(task_id, after_seq, follow)

    async def messages(self, task_id: str) -> list[ViewItem]:
        """The task's conversation (user, assistant, tool and injected messages), from its event log."""
        return await self._inspection.messages(task_id)

    async def export(self, task_id: str) -> dict[str, Any]:
        """The task as a JSON-serialisable dict: its history (every run, payloads decoded) and the
        stored bodies it refers to (see :mod:`noeta.client.export`); ``noeta.sdk.testing.load_task``
        reads it back (an imported task's: the export it was imported from). TaskNotFoundError for an unknown task."""
        imported = await imported_export(self.temporal, self.content_store, task_id)
        return imported if imported is not None else await export_task(self.temporal, self.content_store, task_id)

    # Observers and streamed deltas.

    async def observe(self, task_id: str, observers: Sequence[Observer], after_seq: int = 0) -> int:
        """Call each observer once per envelope, in order, until the task ends."""
        return await self._observation.observe(task_id, observers, after_seq)

    async def observed(self, task_id: str) -> int:
        """Wait until the observers of a task this client started have seen its last envelope."""
        return await self._observation.observed(task_id)

    async def deltas(self, task_id: str, after: int | StreamDelta | None = None) -> DeltaStream:
        """``task_id``'s streamed pieces (``async for delta in stream``) until its end, from its
        workflow stream: all of them (``after=None``), from the batch at offset ``after`` on
        (inclusive), or after the delta ``after``; with a broker, the broker's from now on."""
        return await self._deltas.stream(task_id, after)

    async def close(self, task_id: str | None = None) -> None:
        """Close this client: stop following tasks for its observers (``close(task_id)``: deprecated)."""
        if task_id is not None:
            warnings.warn("close(task_id) is deprecated: use close_task(task_id)", DeprecationWarning, stacklevel=2)
            await self.close_task(task_id)
            return
        await self._observation.close()
        await self._deltas.close()

    async def __aenter__(self) -> AsyncClient:
        """Return the client itself."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the client (see ``close``)."""
        await self.close()


# Names that were defined (or imported for callers) here before the client was split.
__all__ = ["DEFAULT_PROVIDER", "METADATA_QUERY", "SERVER_OUTAGE_WAIT_SECONDS", "SERVER_UNREACHABLE", "AsyncClient",
           "PendingApproval", "TaskInfo", "TaskSummary", "connect_temporal", "register_search_attributes",
           "registered_search_attributes", "search_attributes_registered"]
