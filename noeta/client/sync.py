"""The synchronous client: the AsyncClient API for code without an event loop (it runs an
AsyncClient on a private event-loop thread)."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from noeta.client.agents import Agents
from noeta.client.blocking import Blocking, SyncSession
from noeta.client.client import AsyncClient
from noeta.client.forwarding import Forwarded, Shared
from noeta.client.host import HostConfig
from noeta.client.runtime import close_at_exit, closed, with_shared_runtime
from noeta.context.content_store import ContentStore
from noeta.protocols.event_log import EventEnvelope, Observer
from noeta.protocols.messages import StreamDelta

T = TypeVar("T")


class Client:
    """The synchronous twin of :class:`AsyncClient`: the same calls with the same signatures, each
    blocking until its answer (:class:`~noeta.client.blocking.Blocking`); the streams (``events``,
    ``deltas``) are iterators. The AsyncClient's settings (``task_queue``, ``observers``,
    ``ui_url``...) are read and set on :attr:`aio`."""

    start = Blocking(AsyncClient.start)
    fork = Blocking(AsyncClient.fork)
    send_goal = Blocking(AsyncClient.send_goal)
    send = Blocking(AsyncClient.send)
    close_task = Blocking(AsyncClient.close_task)
    inject = Blocking(AsyncClient.inject)
    approve = Blocking(AsyncClient.approve)
    cancel = Blocking(AsyncClient.cancel)
    result = Blocking(AsyncClient.result)
    list_tasks = Blocking(AsyncClient.list_tasks)
    pending_approvals = Blocking(AsyncClient.pending_approvals)
    audit = Blocking(AsyncClient.audit)
    messages = Blocking(AsyncClient.messages)
    export = Blocking(AsyncClient.export)
    create_schedule = Blocking(AsyncClient.create_schedule)
    list_schedules = Blocking(AsyncClient.list_schedules)
    describe_schedule = Blocking(AsyncClient.describe_schedule)
    pause_schedule = Blocking(AsyncClient.pause_schedule)
    unpause_schedule = Blocking(AsyncClient.unpause_schedule)
    trigger_schedule = Blocking(AsyncClient.trigger_schedule)
    backfill_schedule = Blocking(AsyncClient.backfill_schedule)
    delete_schedule = Blocking(AsyncClient.delete_schedule)
    schedule_runs = Blocking(AsyncClient.schedule_runs)
    describe = Blocking(AsyncClient.describe)
    current_details = Blocking(AsyncClient.current_details)
    approvals_waiting = Blocking(AsyncClient.approvals_waiting)
    history = Blocking(AsyncClient.history)
    is_running = Blocking(AsyncClient.is_running)
    waiting_for_worker = Blocking(AsyncClient.waiting_for_worker)
    observe = Blocking(AsyncClient.observe)
    observed = Blocking(AsyncClient.observed)
    registered_attributes = Blocking(AsyncClient.registered_attributes)
    indexed = Blocking(AsyncClient.indexed)
    has_attribute = Blocking(AsyncClient.has_attribute)
    # Calls that do not wait: the AsyncClient's own, on this client's.
    task_url = Forwarded("aio", AsyncClient.task_url)
    agent_options = Forwarded("aio", AsyncClient.agent_options)
    agents = Shared[Agents | None, Agents | str | None](
        "aio", "agents", """The agent catalog ``start(goal, agent="triage")`` resolves names in (AsyncClient.agents)."""
    )

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
        self.content_store: ContentStore = connected.content_store
        self.memory: Any = connected.memory
        """The memory pool shared with the memory tool (see :attr:`AsyncClient.memory`)."""
        close_at_exit(self)

    @property
    def aio(self) -> AsyncClient:
        """The underlying AsyncClient (its coroutines must run on this client's loop)."""
        return self._session.aio

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
