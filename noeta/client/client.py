"""Client: start tasks, send goals, read events and messages, wait for results, cancel.

:class:`AsyncClient` is the asyncio API; :class:`Client` is the same API for synchronous code (it
runs an AsyncClient on a private event-loop thread). Both talk to the embedded dev server unless
``TEMPORAL_ADDRESS`` points at a cluster.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import uuid
import warnings
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client as TemporalClient
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
)
from temporalio.converter import PayloadCodec
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TerminatedError,
)
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from noeta import search_attributes
from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer, ensure_server
from noeta.client.events import EventStream, history_events, notify
from noeta.client.messages import ViewItem, as_messages
from noeta.client.options import HostConfig, Options, build_task_input, check_goal
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
    TaskCancelledError,
    TaskFailedError,
    TaskNotFoundError,
    TaskNotOpenError,
    rebuild_error,
)
from noeta.plugin import NoetaPlugin
from noeta.protocols.event_log import EventEnvelope, Observer
from noeta.protocols.messages import ImageBlock, LLMProvider, registry_name
from noeta.protocols.names import (
    BASE_SEARCH_ATTRIBUTES,
    QUERY_PENDING_APPROVALS,
    SA_API_KEY,
    SA_COST_USD,
    SA_STATUS,
    SEARCH_ATTRIBUTES,
    SIGNAL_CLOSE,
    SIGNAL_INJECT,
    UPDATE_APPROVE,
    UPDATE_SEND_GOAL,
    WORKFLOW_NAME,
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


async def connect_temporal(
    settings: Settings,
    connect_timeout: float = 15.0,
    *,
    codec: PayloadCodec | None = None,
    runtime: Runtime | None = None,
) -> tuple[TemporalClient, EmbeddedServer | None]:
    """Connect to the configured cluster, starting the embedded dev server when none is set.
    ``codec``: the payload codec (default: the environment's, see noeta.security.codec);
    ``runtime``: a Temporal Runtime exporting metrics (noeta.telemetry.metrics.runtime_for)."""
    from noeta.security.codec import codec_from_env

    server = None
    if settings.embedded:
        server = await asyncio.to_thread(ensure_server, settings.home / "temporal")
    connect_config = settings.temporal_connect_config(server.address if server else None)
    deadline = asyncio.get_running_loop().time() + connect_timeout
    while True:
        try:
            client = await TemporalClient.connect(
                **connect_config,
                plugins=[NoetaPlugin(codec=codec or codec_from_env())],
                runtime=runtime,
            )
            if server is not None:
                # A data directory made by an older release lacks the search attributes added
                # since (the dev server registers its flags' attributes only in a new database).
                try:
                    await register_search_attributes(client)
                except RPCError:
                    pass  # tasks run without the missing ones (see AsyncClient.indexed)
            return client, server
        except RuntimeError:
            # A freshly started server accepts TCP a moment before it serves gRPC.
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


_STATUS, _MODEL, _TURNS, _TOKENS_IN, _TOKENS_OUT, _COST_USD, _API_KEY = (
    search_attributes.STATUS, search_attributes.MODEL, search_attributes.TURNS,
    search_attributes.TOKENS_IN, search_attributes.TOKENS_OUT, search_attributes.COST_USD,
    search_attributes.API_KEY,
)


#: NoetaStatus values -> Temporal execution status, for clusters without the search attributes.
_EXECUTION_STATUS = {"cancelled": "Canceled", "timed_out": "TimedOut", "continued_as_new": "ContinuedAsNew"}


@dataclass(frozen=True)
class TaskSummary:
    task_id: str
    status: str
    model: str | None
    turns: int
    tokens_in: int
    tokens_out: int
    started: datetime | None
    cost_usd: float = 0.0
    """US dollars so far (NoetaCostUSD; 0 when unpriced or on a cluster without it)."""


def initial_search_attributes(options: Options, api_key_id: str | None = None) -> TypedSearchAttributes:
    pairs: list[SearchAttributePair[Any]] = [SearchAttributePair(_STATUS, "running"), SearchAttributePair(_TURNS, 0)]
    if options.model:
        pairs.append(SearchAttributePair(_MODEL, options.model))
    if api_key_id:
        pairs.append(SearchAttributePair(_API_KEY, api_key_id))
    return TypedSearchAttributes(pairs)


async def registered_search_attributes(temporal: TemporalClient) -> set[str]:
    """Which of Noeta's search attributes the cluster has (empty when it cannot be asked)."""
    try:
        response = await temporal.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=temporal.namespace)
        )
    except RPCError:
        return set()  # e.g. no operator permission: run without them
    return set(SEARCH_ATTRIBUTES) & set(response.custom_attributes)


async def search_attributes_registered(temporal: TemporalClient) -> bool:
    """Whether tasks can be indexed at all (the attributes of the first release are registered;
    later ones, such as NoetaCostUSD, are used where present: ``noeta setup`` adds them)."""
    return set(BASE_SEARCH_ATTRIBUTES) <= await registered_search_attributes(temporal)


async def register_search_attributes(temporal: TemporalClient) -> list[str]:
    """Register the missing Noeta search attributes on the cluster; returns the names added."""
    response = await temporal.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=temporal.namespace)
    )
    missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in response.custom_attributes}
    if missing:
        await temporal.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=temporal.namespace,
                search_attributes={k: getattr(IndexedValueType, f"INDEXED_VALUE_TYPE_{v.upper()}") for k, v in missing.items()},
            )
        )
    return sorted(missing)


def _run_ended_first(err: WorkflowUpdateFailedError) -> bool:
    """The update's run closed before the update finished (for a running task: continue-as-new)."""
    cause = err.cause
    return isinstance(cause, ApplicationError) and cause.type == "AcceptedUpdateCompletedWorkflow"


def translate_failure(err: BaseException) -> NoetaError:
    """A workflow/update failure as the typed Noeta error it carries."""
    cause = err.cause if isinstance(err, (WorkflowFailureError, WorkflowUpdateFailedError)) else err
    while isinstance(cause, (ActivityError, ChildWorkflowError)) and cause.cause is not None:
        cause = cause.cause  # an activity that failed for good: its own error says why
    if isinstance(cause, CancelledError):
        return TaskCancelledError("the task was cancelled")
    if isinstance(cause, TerminatedError):
        return TaskFailedError(f"the task was terminated: {cause.message}")
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details else None
        rebuilt = rebuild_error(cause.type, cause.message, details)
        if rebuilt is not None:
            return rebuilt
        return TaskFailedError(f"{cause.type or 'error'}: {cause.message}")
    return TaskFailedError(str(cause or err))


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
        self._registered: set[str] | None = None
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
        indexed = await self.indexed()
        if indexed:
            task_input = dataclasses.replace(task_input, index=True, index_cost=await self.has_attribute(SA_COST_USD))
        if api_key_id is not None and not await self.has_attribute(SA_API_KEY):
            api_key_id = None  # an older cluster: `noeta setup` registers it
        await self.temporal.start_workflow(
            WORKFLOW_NAME,
            task_input,
            id=task_id,
            task_queue=task_queue or self.task_queue,
            static_summary=goal if len(goal) <= 200 else goal[:199] + "…",
            static_details=(
                f"**provider** {provider_name} · **model** {options.model or 'default'} · "
                f"**tools** {', '.join(task_input.tools) or 'none'} · **max_turns** {options.max_turns}"
            ),
            search_attributes=initial_search_attributes(options, api_key_id) if indexed else None,
        )
        observers = [*self.observers, *options.observers]
        if observers:
            self._observing[task_id] = asyncio.create_task(self.observe(task_id, observers))
        return task_id

    async def indexed(self) -> bool:
        """Whether the cluster has Noeta's search attributes registered (checked once)."""
        if self._registered is None:
            self._registered = await registered_search_attributes(self.temporal)
        return set(BASE_SEARCH_ATTRIBUTES) <= self._registered

    async def has_attribute(self, name: str) -> bool:
        """Whether the cluster has this one of Noeta's search attributes (checked once)."""
        await self.indexed()
        return name in (self._registered or set())

    async def list_tasks(self, status: str | None = None, limit: int = 50) -> list[TaskSummary]:
        """Tasks on the cluster, newest first; ``status`` filters on NoetaStatus (or, without the
        search attributes, on the workflow's execution status)."""
        query = f"WorkflowType = '{WORKFLOW_NAME}'"
        indexed = await self.indexed()
        if status:
            if not re.fullmatch(r"[a-z_]{1,40}", status):
                raise ConfigurationError(f"not a task status: {status!r}")
            if indexed:
                query += f" AND {SA_STATUS} = '{status}'"
            else:
                query += f" AND ExecutionStatus = '{_EXECUTION_STATUS.get(status, status.capitalize())}'"
        tasks = []
        async for wf in self.temporal.list_workflows(query, limit=limit):
            attrs = wf.typed_search_attributes
            tasks.append(
                TaskSummary(
                    task_id=wf.id,
                    status=attrs.get(_STATUS) or (wf.status.name.lower() if wf.status else "unknown"),
                    model=attrs.get(_MODEL),
                    turns=attrs.get(_TURNS) or 0,
                    tokens_in=attrs.get(_TOKENS_IN) or 0,
                    tokens_out=attrs.get(_TOKENS_OUT) or 0,
                    started=wf.start_time,
                    cost_usd=attrs.get(_COST_USD) or 0.0,
                )
            )
        return tasks

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
                    raise TaskNotOpenError(f"task {task_id!r} has ended or does not exist") from err
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
        handle = self.temporal.get_workflow_handle(task_id)
        try:
            await handle.execute_update(UPDATE_APPROVE, ApprovalInput(call_id, approved, reason, approver))
        except WorkflowUpdateFailedError as err:
            raise translate_failure(err) from err
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise TaskNotOpenError(f"task {task_id!r} has ended or does not exist") from err
            raise

    async def pending_approvals(self, task_id: str) -> list[ApprovalRequest]:
        """Actions of a running task waiting for a human (asks the live workflow)."""
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
        await self.temporal.get_workflow_handle(task_id).signal(SIGNAL_INJECT, InjectInput(text, origin))  # type: ignore[arg-type]

    async def close_task(self, task_id: str) -> None:
        """Let a keep-open task end after its queued goals."""
        await self.temporal.get_workflow_handle(task_id).signal(SIGNAL_CLOSE)

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
        """Wait for the task's (last goal's) result; raises the task's typed error if it failed."""
        handle = self.temporal.get_workflow_handle(task_id, result_type=TaskResult)
        try:
            result: TaskResult = await handle.result()
            return result
        except WorkflowFailureError as err:
            raise translate_failure(err) from err
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise TaskNotFoundError(f"no task {task_id!r}") from err
            raise

    async def cancel(self, task_id: str) -> None:
        await self.temporal.get_workflow_handle(task_id).cancel()

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
        desc = await self.temporal.get_workflow_handle(task_id).describe()
        return desc.status is not None and desc.status.name == "RUNNING"


class Client:
    """The synchronous twin of :class:`AsyncClient` (same methods, blocking)."""

    def __init__(self, host: HostConfig | None = None, observers: Sequence[Observer] = ()) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="noeta-client", daemon=True)
        self._thread.start()
        self._async = self._run(AsyncClient.connect(host, observers))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def content_store(self) -> ContentStore:
        return self._async.content_store

    @property
    def memory(self) -> Any:
        """The memory pool shared with the memory tool (see :attr:`AsyncClient.memory`)."""
        return self._async.memory

    @property
    def aio(self) -> AsyncClient:
        """The underlying AsyncClient (its coroutines must run on this client's loop)."""
        return self._async

    def start(self, goal: str, options: Options | None = None, **kwargs: Any) -> str:
        return self._run(self._async.start(goal, options, **kwargs))

    def send_goal(self, task_id: str, goal: str, images: Sequence[ImageBlock] = ()) -> TaskResult:
        return self._run(self._async.send_goal(task_id, goal, images))

    def close_task(self, task_id: str) -> None:
        """Let a keep-open task end after its queued goals."""
        self._run(self._async.close_task(task_id))

    def close(self, task_id: str | None = None) -> None:
        """Close this client and stop its event-loop thread. (``close(task_id)``, which closed a
        task, is deprecated: use :meth:`close_task`.)"""
        if task_id is not None:
            warnings.warn("close(task_id) is deprecated: use close_task(task_id)", DeprecationWarning, stacklevel=2)
            self.close_task(task_id)
            return
        if self._thread.is_alive():
            self._run(self._async.close())
            self.shutdown()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def inject(self, task_id: str, text: str, origin: str = "system") -> None:
        self._run(self._async.inject(task_id, text, origin))

    def approve(self, task_id: str, call_id: str, approved: bool = True, reason: str | None = None,
                approver: str | None = None) -> None:
        self._run(self._async.approve(task_id, call_id, approved, reason, approver))

    def pending_approvals(self, task_id: str) -> list[ApprovalRequest]:
        return self._run(self._async.pending_approvals(task_id))

    def result(self, task_id: str) -> TaskResult:
        return self._run(self._async.result(task_id))

    def cancel(self, task_id: str) -> None:
        self._run(self._async.cancel(task_id))

    def list_tasks(self, status: str | None = None, limit: int = 50) -> list[TaskSummary]:
        return self._run(self._async.list_tasks(status, limit))

    def events(self, task_id: str, after_seq: int = 0, follow: bool = False) -> Iterator[EventEnvelope]:
        """Iterate over the task's envelopes; ``follow=True`` blocks for new ones until the task ends."""
        stream = self._async.events(task_id, after_seq=after_seq, follow=follow).__aiter__()

        async def next_envelope() -> EventEnvelope:
            return await stream.__anext__()

        while True:
            try:
                yield self._run(next_envelope())
            except StopAsyncIteration:
                return

    def messages(self, task_id: str) -> list[ViewItem]:
        return self._run(self._async.messages(task_id))

    def shutdown(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
