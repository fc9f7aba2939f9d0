"""The synchronous client: the AsyncClient API for code without an event loop (it runs an
AsyncClient on a private event-loop thread)."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from noeta.client.host import HostConfig
from noeta.client.messages import ViewItem
from noeta.client.options import Options
from noeta.client.visibility import TaskSummary
from noeta.context.content_store import ContentStore
from noeta.protocols.event_log import EventEnvelope, Observer
from noeta.protocols.interaction import ApprovalRequest, TaskResult
from noeta.protocols.messages import ImageBlock

if TYPE_CHECKING:
    from noeta.client.client import AsyncClient

T = TypeVar("T")


class Client:
    """The synchronous twin of :class:`AsyncClient` (same methods, blocking)."""

    def __init__(self, host: HostConfig | None = None, observers: Sequence[Observer] = ()) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="noeta-client", daemon=True)
        self._thread.start()
        from noeta.client.client import AsyncClient  # imported here: that module re-exports this one

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
