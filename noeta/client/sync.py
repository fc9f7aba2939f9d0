"""The synchronous client: the AsyncClient API for code without an event loop (it runs an
AsyncClient on a private event-loop thread)."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from noeta.client.agents import Agents
from noeta.client.audit import AuditEntry
from noeta.client.client import AsyncClient
from noeta.client.export import LoadedTask
from noeta.client.forwarding import Forwarded
from noeta.client.host import HostConfig
from noeta.client.messages import ViewItem
from noeta.client.options import Options
from noeta.client.sync_session import SyncSession
from noeta.client.runtime import close_at_exit, closed, with_shared_runtime
from noeta.client.sync_schedules import SyncScheduleCalls
from noeta.client.visibility import TaskSummary
from noeta.context.content_store import ContentStore
from noeta.protocols.event_log import EventEnvelope, Observer
from noeta.protocols.interaction import ApprovalRequest, TaskResult
from noeta.protocols.messages import ImageBlock, StreamDelta
from noeta.protocols.statuses import IfBusy

T = TypeVar("T")


class Client:
    """The synchronous twin of :class:`AsyncClient` (same methods, blocking; the schedule calls
    are :mod:`noeta.client.sync_schedules`', forwarded)."""

    create_schedule = Forwarded("_schedules", SyncScheduleCalls.create_schedule)
    list_schedules = Forwarded("_schedules", SyncScheduleCalls.list_schedules)
    describe_schedule = Forwarded("_schedules", SyncScheduleCalls.describe_schedule)
    pause_schedule = Forwarded("_schedules", SyncScheduleCalls.pause_schedule)
    unpause_schedule = Forwarded("_schedules", SyncScheduleCalls.unpause_schedule)
    trigger_schedule = Forwarded("_schedules", SyncScheduleCalls.trigger_schedule)
    backfill_schedule = Forwarded("_schedules", SyncScheduleCalls.backfill_schedule)
    delete_schedule = Forwarded("_schedules", SyncScheduleCalls.delete_schedule)
    schedule_runs = Forwarded("_schedules", SyncScheduleCalls.schedule_runs)

    def __init__(self, host: HostConfig | None = None, observers: Sequence[Observer] = ()) -> None:
        """Connect to the cluster of ``host`` (default: from the environment); ``observers`` get every
        envelope of the tasks this client starts. The client runs its own event loop on a daemon thread."""
        # The process's shared runtime unless given one, never temporalio's default: that one would
        # still run when the interpreter finalizes (noeta.client.runtime).
        host = with_shared_runtime(host or HostConfig())
        self._loop = asyncio.new_event_loop()
        self._session = SyncSession(self._loop)
        self._run = self._session.run
        self._thread = threading.Thread(target=self._loop.run_forever, name="noeta-client", daemon=True)
        self._thread.start()
        try:
            connected = self._session.client = self._run(AsyncClient.connect(host, observers))
        except BaseException:
            self._stop()
            raise
        self._schedules = SyncScheduleCalls(self._session)
        self.content_store: ContentStore = connected.content_store
        self.memory: Any = connected.memory
        """The memory pool shared with the memory tool (see :attr:`AsyncClient.memory`)."""
        close_at_exit(self)


    @property
    def aio(self) -> AsyncClient:
        """The underlying AsyncClient (its coroutines must run on this client's loop)."""
        return self._session.aio

    @property
    def agents(self) -> Agents | None:
        """The agent catalog ``start(goal, agent="triage")`` resolves names in (AsyncClient.agents)."""
        return self.aio.agents

    @agents.setter
    def agents(self, agents: Agents | str | None) -> None:
        self.aio.agents = agents

    def start(self, goal: str, options: Options | None = None, **kwargs: Any) -> str:
        """Start a task; returns its id (see AsyncClient.start; ``agent="triage@2"`` starts an agent version)."""
        return self._run(self.aio.start(goal, options, **kwargs))

    def send_goal(
        self, task_id: str, goal: str, images: Sequence[ImageBlock] = (), *, if_busy: IfBusy = "enqueue"
    ) -> TaskResult:
        """Give a keep-open task its next goal and wait for the result that answers it
        (``if_busy``: as AsyncClient.send_goal's)."""
        return self._run(self.aio.send_goal(task_id, goal, images, if_busy=if_busy))

    def send(
        self, thread_id: str, message: str, options: Options | None = None, *, request_id: str | None = None,
        if_busy: IfBusy = "enqueue",
    ) -> TaskResult:
        """Send ``message`` to the conversation ``thread_id``, starting it if needed (AsyncClient.send)."""
        return self._run(self.aio.send(thread_id, message, options, request_id=request_id, if_busy=if_busy))

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
        if self._session.client is not None and self._thread.is_alive():
            try:
                self._run(self._session.client.close())
            finally:
                self.shutdown()

    def __enter__(self) -> Client:
        """Return the client itself."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the client."""
        self.close()

    def inject(self, task_id: str, text: str, origin: str = "system") -> None:
        """Add a message to the task's conversation (``origin`` "system" or "memory"); the model reads it at
        its next step."""
        self._run(self.aio.inject(task_id, text, origin))

    def approve(self, task_id: str, call_id: str, approved: bool = True, reason: str | None = None,
                approver: str | None = None, *, arguments: dict[str, Any] | None = None) -> None:
        """Answer the pending approval ``call_id`` of the task (``arguments``: approve the tool call
        with these instead; see AsyncClient.approve)."""
        self._run(self.aio.approve(task_id, call_id, approved, reason, approver, arguments=arguments))

    def audit(self, task_id: str) -> list[AuditEntry]:
        """Who started the task, answered its approvals, injected, cancelled it, and when."""
        return self._run(self.aio.audit(task_id))

    def pending_approvals(self, task_id: str) -> list[ApprovalRequest]:
        """The task's actions waiting for a human's approval."""
        return self._run(self.aio.pending_approvals(task_id))

    def result(self, task_id: str) -> TaskResult:
        """Wait for the task's result."""
        return self._run(self.aio.result(task_id))

    def cancel(self, task_id: str) -> None:
        """Ask the task to cancel."""
        self._run(self.aio.cancel(task_id))

    def list_tasks(self, status: str | None = None, limit: int = 50) -> list[TaskSummary]:
        """At most ``limit`` tasks, newest first, optionally only those of one status."""
        return self._run(self.aio.list_tasks(status, limit))

    def events(self, task_id: str, after_seq: int = 0, follow: bool = False) -> Iterator[EventEnvelope]:
        """Iterate over the task's envelopes; ``follow=True`` blocks for new ones until the task ends."""
        return self._blocking(self.aio.events(task_id, after_seq=after_seq, follow=follow).__aiter__())

    def deltas(self, task_id: str, after: int | StreamDelta | None = None) -> Iterator[StreamDelta]:
        """The task's streamed pieces until its end (``for delta in client.deltas(task_id)``), as
        AsyncClient.deltas gives them (``after``: None, an offset, inclusive, or a delta to resume
        after). Closing the iterator (or leaving the ``for`` loop) stops the read."""
        stream = self._run(self.aio.deltas(task_id, after))
        return self._blocking(stream, close=stream.close)

    def _blocking(
        self, items: AsyncIterator[T], close: Callable[[], Coroutine[Any, Any, None]] | None = None
    ) -> Iterator[T]:
        """``items`` one by one, each awaited on the client's loop; ``close()`` runs when the
        iteration ends or is abandoned."""

        async def next_item() -> T:
            return await items.__anext__()

        try:
            while True:
                try:
                    yield self._run(next_item())
                except StopAsyncIteration:
                    return
        finally:
            if close is not None and not self._loop.is_closed():
                self._run(close())

    def messages(self, task_id: str) -> list[ViewItem]:
        """The task's conversation as view items (see ``as_messages``)."""
        return self._run(self.aio.messages(task_id))

    def export(self, task_id: str) -> dict[str, Any]:
        """The task's history and the stored bodies it refers to, as a JSON-serialisable dict."""
        return self._run(self.aio.export(task_id))

    def fork(self, source: str | LoadedTask, /, **kwargs: Any) -> str:
        """Start a fork of ``source`` from its model turn ``at_turn`` (a required keyword); returns
        the fork's id (the keywords are AsyncClient.fork's)."""
        return self._run(self.aio.fork(source, **kwargs))

    def shutdown(self) -> None:
        """Stop the event-loop thread (``close()`` does, after closing the client). The Temporal
        runtime is the process's, stopped at exit (noeta.client.runtime), or the caller's."""
        self._stop()

    def _stop(self) -> None:
        if self._thread.is_alive():
            # As asyncio.run ends: nothing left awaiting a call into the runtime.
            asyncio.run_coroutine_threadsafe(_finish_loop(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if self._thread.is_alive() or self._loop.is_closed():
            return
        self._loop.close()
        closed(self)
        self._session.client = None


async def _finish_loop() -> None:
    current = asyncio.current_task()
    pending = [t for t in asyncio.all_tasks() if t is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    loop = asyncio.get_running_loop()
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()
