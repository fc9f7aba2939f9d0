"""Client: start tasks, send goals, read events and messages, wait for results, cancel.

:class:`AsyncClient` is the asyncio API; :class:`Client` is the same API for synchronous code (it
runs an AsyncClient on a private event-loop thread). Both talk to the embedded dev server unless
``TEMPORAL_ADDRESS`` points at a cluster.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
import warnings
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client as TemporalClient
from temporalio.client import (
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from noeta.client.connect import connect_temporal
from noeta.client.embedded import EmbeddedServer
from noeta.client.events import EventStream, history_events, notify
from noeta.client.failures import _run_ended_first, translate_failure
from noeta.client.messages import ViewItem, as_messages
from noeta.client.options import HostConfig, Options, build_task_input, check_goal
from noeta.client.runtime import close_at_exit, closed, private_runtime, release
from noeta.client.visibility import (  # noqa: F401  (TaskSummary and the registration helpers were defined here)
    CLOSED_STATUS,
    TaskInfo,
    TaskSummary,
    initial_search_attributes,
    register_search_attributes,
    registered_search_attributes,
    search_attributes_registered,
    summary_of,
    task_query,
)
from noeta.context.content_store import ContentStore
from noeta.deltas.broker import (
    DeltaBroker,
    DeltaStream,
    Subscription,
    broker_for,
    in_process_broker,
    subscribe_stream,
)
from noeta.errors import (
    ConfigurationError,
    NoetaError,
    PayloadTooLargeError,
    TaskFailedError,
    TaskNotFoundError,
    TaskNotOpenError,
)
from noeta.protocols.event_log import EventEnvelope, Observer
from noeta.protocols.messages import ImageBlock, LLMProvider, registry_name
from noeta.protocols.names import (
    BASE_SEARCH_ATTRIBUTES,
    QUERY_PENDING_APPROVALS,
    SA_API_KEY,
    SA_COST_USD,
    SIGNAL_CLOSE,
    SIGNAL_INJECT,
    UPDATE_APPROVE,
    UPDATE_SEND_GOAL,
    workflow_name_for,
)
from noeta.protocols.task import (
    MAX_INJECTION_CHARS,
    ApprovalInput,
    ApprovalRequest,
    GoalInput,
    InjectInput,
    TaskResult,
)

T = TypeVar("T")

#: The provider name a task uses when Options names none.
DEFAULT_PROVIDER = "default"


#: The query the Temporal UI sends for "Current Details" (and the handlers' descriptions).
METADATA_QUERY = "__temporal_workflow_metadata"


@dataclass(frozen=True)
class PendingApproval:
    """An action waiting for a human, with the task it belongs to (the approvals inbox)."""

    task_id: str
    goal: str | None
    request: ApprovalRequest


#: How long ``AsyncClient.result`` keeps waiting while the Temporal server cannot be reached.
SERVER_OUTAGE_WAIT_SECONDS = 600.0
#: RPC statuses that mean "the server is not reachable right now" (not "your request is wrong").
SERVER_UNREACHABLE = frozenset({RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNKNOWN})


class AsyncClient:
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

    @classmethod
    async def connect(cls, host: HostConfig | None = None, observers: Sequence[Observer] = ()) -> AsyncClient:
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
        )
        client.indexed_metadata = host.settings.indexed_metadata
        client.ui_url = host.settings.temporal_ui or client.ui_url
        if host.delta_sink is not None:  # every task's deltas, from any worker, until close()
            client._delta_subscription = await client.delta_broker.subscribe(temporal.namespace, host.delta_sink)
        return client

    async def deltas(self, task_id: str) -> DeltaStream:
        """The streamed pieces of ``task_id``'s model responses as they arrive, from any worker,
        through the delta broker: ``async with await client.deltas(task_id) as stream: async for
        delta in stream``. Subscribed when this returns; deltas streamed earlier are not replayed
        (history holds the final responses)."""
        return await subscribe_stream(self.delta_broker, self.temporal.namespace, task_id)

    async def start(
        self,
        goal: str,
        options: Options | None = None,
        *,
        task_id: str | None = None,
        keep_open: bool = False,
        images: Sequence[ImageBlock] = (),
        workspace_dir: str | Path | None = None,
        provider_name: str | None = None,
        task_queue: str | None = None,
        api_key_id: str | None = None,
    ) -> str:
        """Start a task and return its id (the workflow id). ``api_key_id``: the ``noeta serve`` key
        that starts it, indexed as NoetaApiKey so the key's spend can be summed."""
        options = options or Options()
        if provider_name is None:
            if isinstance(options.provider, str):
                provider_name = options.provider
            elif isinstance(options.provider, LLMProvider):
                provider_name = registry_name(options.provider)
            else:
                provider_name = DEFAULT_PROVIDER
        task_id = task_id or f"task-{uuid.uuid4().hex[:12]}"
        task_input = build_task_input(
            options,
            goal,
            provider_name=provider_name,
            keep_open=keep_open,
            images=images,
            workspace_dir=workspace_dir,
            task_id=task_id,
        )
        registered = await self.registered_attributes()
        indexed = set(BASE_SEARCH_ATTRIBUTES) <= registered
        if indexed:
            task_input = dataclasses.replace(task_input, index=True, index_cost=await self.has_attribute(SA_COST_USD))
        if api_key_id is not None and not await self.has_attribute(SA_API_KEY):
            api_key_id = None  # an older cluster: `noeta setup` registers it
        await self.temporal.start_workflow(
            workflow_name_for(task_input.policy),
            task_input,
            id=task_id,
            task_queue=task_queue or self.task_queue,
            static_summary=goal if len(goal) <= 200 else goal[:199] + "…",
            static_details=(
                f"**provider** {provider_name} · **model** {options.model or 'default'} · "
                f"**tools** {', '.join(task_input.tools) or 'none'} · **max_turns** {options.max_turns}"
            ),
            search_attributes=initial_search_attributes(
                registered, None if self.encrypted else goal, options.model, options.metadata,
                self.indexed_metadata, api_key_id,
            )
            if indexed
            else None,
        )
        observers = [*self.observers, *options.observers]
        if observers:
            self._observing[task_id] = asyncio.create_task(self.observe(task_id, observers))
        return task_id

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

    async def list_tasks(
        self,
        status: str | None = None,
        limit: int = 50,
        *,
        search: str | None = None,
        model: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> list[TaskSummary]:
        """Tasks on the cluster, newest first. ``status`` filters on NoetaStatus (or, without the
        search attributes, on the workflow's execution status); ``search`` matches words of the
        goal; ``model`` and ``metadata`` (indexed keys) match exactly."""
        query = task_query(await self.registered_attributes(), status, search, model, metadata)
        return [summary_of(wf) async for wf in self.temporal.list_workflows(query, limit=limit)]

    async def describe(self, task_id: str) -> TaskInfo:
        """The task as it is now: its summary, and once it has ended its result or typed error."""
        desc = await self._describe(task_id)
        summary = vars(summary_of(desc))
        if desc.status == WorkflowExecutionStatus.RUNNING:
            return TaskInfo(**summary, running=True)
        try:
            result = await self.result(task_id)
        except NoetaError as err:
            status = CLOSED_STATUS.get(desc.status, "failed") if desc.status else "failed"
            return TaskInfo(**{**summary, "status": status}, error=err)
        cost = result.usage.cost_usd or summary["cost_usd"]  # the result is final; visibility may lag
        return TaskInfo(**{**summary, "status": result.status, "cost_usd": cost}, result=result)

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

    async def current_details(self, task_id: str) -> str:
        """What a running task is doing or waiting for (the Temporal UI's "Current Details"); a live
        worker answers, so this waits for one. Empty for a task that has ended."""
        if (await self._describe(task_id)).status != WorkflowExecutionStatus.RUNNING:
            return ""
        try:
            metadata = await self.temporal.get_workflow_handle(task_id).query(METADATA_QUERY, result_type=WorkflowMetadata)
        except WorkflowQueryFailedError:
            return ""
        return metadata.current_details

    def task_url(self, task_id: str) -> str | None:
        """The task's page in the Temporal UI (None when the UI's address is not known)."""
        if not self.ui_url:
            return None
        from urllib.parse import quote

        return f"{self.ui_url.rstrip('/')}/namespaces/{quote(self.temporal.namespace)}/workflows/{quote(task_id, safe='')}"

    async def approvals_waiting(self, limit: int = 100) -> list[PendingApproval]:
        """Every action waiting for a human, across the tasks whose status is awaiting_approval."""
        waiting: list[PendingApproval] = []
        for task in await self.list_tasks("awaiting_approval", limit):
            try:
                requests = await self.pending_approvals(task.task_id)
            except (TaskNotFoundError, TaskNotOpenError, WorkflowQueryFailedError):
                continue  # answered or ended since the (lagging) list was read
            waiting += [PendingApproval(task.task_id, task.goal, r) for r in requests]
        return waiting

    async def observed(self, task_id: str) -> int:
        """Wait until the observers of a task this client started have seen its last envelope."""
        task = self._observing.pop(task_id, None)
        return await task if task is not None else 0

    async def send_goal(self, task_id: str, goal: str, images: Sequence[ImageBlock] = ()) -> TaskResult:
        """Send the next goal to a task started with ``keep_open=True``; returns that goal's result."""
        check_goal(goal)
        request = GoalInput(goal=goal, images=list(images), goal_id=uuid.uuid4().hex)
        while True:
            handle = self.temporal.get_workflow_handle(task_id)  # the task's current run
            try:
                result: TaskResult = await handle.execute_update(UPDATE_SEND_GOAL, request, result_type=TaskResult)
                return result
            except WorkflowUpdateFailedError as err:
                if _run_ended_first(err) and await self.is_running(task_id):
                    continue  # the task continued as new: follow the goal (same goal_id) into the new run
                failure = translate_failure(err)
                if isinstance(failure, TaskFailedError) and not await self.is_running(task_id):
                    # The task failed while working on this goal: the update only says "the workflow
                    # completed"; the task's own error says why.
                    try:
                        await self.result(task_id)
                    except NoetaError as real:
                        raise real from err
                raise failure from err
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    raise await self._ended_or_missing(task_id) from err
                raise

    async def approve(
        self,
        task_id: str,
        call_id: str,
        approved: bool = True,
        reason: str | None = None,
        approver: str | None = None,
    ) -> None:
        """Answer an action that a guard sent for approval (``approved=False`` refuses it)."""
        if not call_id or not isinstance(call_id, str):
            raise ConfigurationError("call_id must be a non-empty string")
        handle = self.temporal.get_workflow_handle(task_id)
        try:
            await handle.execute_update(UPDATE_APPROVE, ApprovalInput(call_id, approved, reason, approver))
        except WorkflowUpdateFailedError as err:
            raise translate_failure(err) from err
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise await self._ended_or_missing(task_id) from err
            raise

    async def pending_approvals(self, task_id: str) -> list[ApprovalRequest]:
        """Actions of a running task waiting for a human (asks the live workflow); none once the
        task has ended."""
        if (await self._describe(task_id)).status != WorkflowExecutionStatus.RUNNING:
            return []
        pending: list[ApprovalRequest] = await self.temporal.get_workflow_handle(task_id).query(
            QUERY_PENDING_APPROVALS, result_type=list[ApprovalRequest]
        )
        return pending

    async def inject(self, task_id: str, text: str, origin: str = "system") -> None:
        """Give the model host context at its next step (origin "system" or "memory"); it shows as
        an InjectedMessage, never as the user's words."""
        if origin not in ("system", "memory"):
            raise ConfigurationError(f"origin must be 'system' or 'memory', got {origin!r}")
        if not text.strip():
            raise ConfigurationError("injected text must not be empty")
        if len(text) > MAX_INJECTION_CHARS:
            raise PayloadTooLargeError(
                f"injected text has {len(text)} characters; the limit is {MAX_INJECTION_CHARS}. Put large "
                "documents in a content channel or behind a tool"
            )
        try:
            await self.temporal.get_workflow_handle(task_id).signal(SIGNAL_INJECT, InjectInput(text, origin))  # type: ignore[arg-type]
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise await self._ended_or_missing(task_id) from err
            raise

    async def close_task(self, task_id: str) -> None:
        """Let a keep-open task end after its queued goals."""
        try:
            await self.temporal.get_workflow_handle(task_id).signal(SIGNAL_CLOSE)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise await self._ended_or_missing(task_id) from err
            raise

    async def close(self, task_id: str | None = None) -> None:
        """Close this client: stop following tasks for its observers. (``close(task_id)``, which
        closed a task, is deprecated: use :meth:`close_task`.)"""
        if task_id is not None:
            warnings.warn("close(task_id) is deprecated: use close_task(task_id)", DeprecationWarning, stacklevel=2)
            await self.close_task(task_id)
            return
        observing = list(self._observing.values())
        for follower in observing:
            follower.cancel()
        await asyncio.gather(*observing, return_exceptions=True)
        self._observing.clear()
        subscription, self._delta_subscription = self._delta_subscription, None
        if subscription is not None:
            await subscription.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def result(self, task_id: str) -> TaskResult:
        """Wait for the task's (last goal's) result; raises the task's typed error if it failed.

        Keeps waiting through a Temporal outage of up to SERVER_OUTAGE_WAIT_SECONDS (the task goes
        on once the server is back); a longer one raises the RPCError."""
        handle = self.temporal.get_workflow_handle(task_id, result_type=TaskResult)
        loop = asyncio.get_running_loop()
        gave_up_at: float | None = None
        delay = 0.5
        while True:
            try:
                result: TaskResult = await handle.result()
                return result
            except WorkflowFailureError as err:
                raise translate_failure(err) from err
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    raise TaskNotFoundError(f"no task {task_id!r}") from err
                if err.status not in SERVER_UNREACHABLE:
                    raise
                gave_up_at = gave_up_at or loop.time() + SERVER_OUTAGE_WAIT_SECONDS
                if loop.time() >= gave_up_at:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def cancel(self, task_id: str) -> None:
        """Cancel a running task (TaskNotOpenError once it has ended: Temporal would ignore it)."""
        await self._require_running(task_id)
        try:
            await self.temporal.get_workflow_handle(task_id).cancel()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise await self._ended_or_missing(task_id) from err
            raise

    async def history(self, task_id: str) -> list[HistoryEvent]:
        """The raw history events of every run of the task, in order."""
        return [event async for _, event in history_events(self.temporal, task_id)]

    def events(self, task_id: str, after_seq: int = 0, follow: bool = False) -> EventStream:
        """The task's event log, projected from its workflow history: ``await`` it for a list, or
        ``async for`` over it; ``follow=True`` yields envelopes live until the task ends."""
        return EventStream(self.temporal, task_id, after_seq=after_seq, follow=follow)

    async def observe(self, task_id: str, observers: Sequence[Observer], after_seq: int = 0) -> int:
        """Call each observer once per envelope, in order, until the task ends."""
        return await notify(self.events(task_id, after_seq=after_seq, follow=True), observers)

    async def messages(self, task_id: str) -> list[ViewItem]:
        return as_messages(await self.events(task_id), self.content_store)

    async def is_running(self, task_id: str) -> bool:
        return (await self._describe(task_id)).status == WorkflowExecutionStatus.RUNNING


class Client:
    """The synchronous twin of :class:`AsyncClient` (same methods, blocking)."""

    def __init__(self, host: HostConfig | None = None, observers: Sequence[Observer] = ()) -> None:
        host = host or HostConfig()
        # A Temporal runtime of its own unless given one, stopped at close() while the interpreter
        # is alive: the default one would still run when it finalizes (noeta.client.runtime).
        self._owns_runtime = host.runtime is None
        if self._owns_runtime:
            host = dataclasses.replace(host, runtime=private_runtime())
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="noeta-client", daemon=True)
        self._thread.start()
        self._async: AsyncClient | None = None
        try:
            self._async = self._run(AsyncClient.connect(host, observers))
        except BaseException as err:
            del host
            self._stop(err)
            raise
        self.content_store: ContentStore = self._async.content_store
        self.memory: Any = self._async.memory
        """The memory pool shared with the memory tool (see :attr:`AsyncClient.memory`)."""
        close_at_exit(self)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("this Client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def aio(self) -> AsyncClient:
        """The underlying AsyncClient (its coroutines must run on this client's loop)."""
        if self._async is None:
            raise RuntimeError("this Client is closed")
        return self._async

    def start(self, goal: str, options: Options | None = None, **kwargs: Any) -> str:
        return self._run(self.aio.start(goal, options, **kwargs))

    def send_goal(self, task_id: str, goal: str, images: Sequence[ImageBlock] = ()) -> TaskResult:
        return self._run(self.aio.send_goal(task_id, goal, images))

    def close_task(self, task_id: str) -> None:
        """Let a keep-open task end after its queued goals."""
        self._run(self.aio.close_task(task_id))

    def close(self, task_id: str | None = None) -> None:
        """Close this client and stop its event-loop thread. (``close(task_id)``, which closed a
        task, is deprecated: use :meth:`close_task`.)"""
        if task_id is not None:
            warnings.warn("close(task_id) is deprecated: use close_task(task_id)", DeprecationWarning, stacklevel=2)
            self.close_task(task_id)
            return
        if self._async is not None and self._thread.is_alive():
            try:
                self._run(self._async.close())
            finally:
                self.shutdown()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def inject(self, task_id: str, text: str, origin: str = "system") -> None:
        self._run(self.aio.inject(task_id, text, origin))

    def approve(self, task_id: str, call_id: str, approved: bool = True, reason: str | None = None,
                approver: str | None = None) -> None:
        self._run(self.aio.approve(task_id, call_id, approved, reason, approver))

    def pending_approvals(self, task_id: str) -> list[ApprovalRequest]:
        return self._run(self.aio.pending_approvals(task_id))

    def result(self, task_id: str) -> TaskResult:
        return self._run(self.aio.result(task_id))

    def cancel(self, task_id: str) -> None:
        self._run(self.aio.cancel(task_id))

    def list_tasks(self, status: str | None = None, limit: int = 50) -> list[TaskSummary]:
        return self._run(self.aio.list_tasks(status, limit))

    def events(self, task_id: str, after_seq: int = 0, follow: bool = False) -> Iterator[EventEnvelope]:
        """Iterate over the task's envelopes; ``follow=True`` blocks for new ones until the task ends."""
        stream = self.aio.events(task_id, after_seq=after_seq, follow=follow).__aiter__()

        async def next_envelope() -> EventEnvelope:
            return await stream.__anext__()

        while True:
            try:
                yield self._run(next_envelope())
            except StopAsyncIteration:
                return

    def messages(self, task_id: str) -> list[ViewItem]:
        return self._run(self.aio.messages(task_id))

    def shutdown(self) -> None:
        """Stop the event-loop thread (``close()`` does, after closing the client) and, when this
        client created its Temporal runtime, that runtime and its threads."""
        self._stop()

    def _stop(self, error: BaseException | None = None) -> None:
        if self._thread.is_alive():
            # As asyncio.run ends: nothing left awaiting a call into the runtime.
            asyncio.run_coroutine_threadsafe(_finish_loop(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if self._thread.is_alive() or self._loop.is_closed():
            return
        self._loop.close()
        closed(self)
        self._async = None
        if self._owns_runtime:
            release(error)


async def _finish_loop() -> None:
    current = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks() if t is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    loop = asyncio.get_running_loop()
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()
