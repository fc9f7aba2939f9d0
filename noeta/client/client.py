"""Client: start tasks, send goals, read events and messages, wait for results, cancel.

:class:`AsyncClient` is the asyncio API; :class:`~noeta.client.sync.Client` is the same API for
synchronous code (it runs an AsyncClient on a private event-loop thread, so it imports this module,
not the other way round). Both talk to the embedded dev server unless
``TEMPORAL_ADDRESS`` points at a cluster.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence

from noeta.client._base import ClientBase
from noeta.client.connect import connect_temporal
from noeta.client.host import HostConfig
from noeta.client.inspection import METADATA_QUERY, Inspection, PendingApproval
from noeta.client.tasks import SERVER_OUTAGE_WAIT_SECONDS, SERVER_UNREACHABLE
from noeta.client.visibility import (
    TaskInfo,
    TaskSummary,
    register_search_attributes,
    registered_search_attributes,
    search_attributes_registered,
)
from noeta.deltas.broker import DeltaStream, broker_for, subscribe_stream
from noeta.protocols.event_log import Observer
from noeta.protocols.names import DEFAULT_PROVIDER


class AsyncClient(Inspection):
    """The asyncio API: task operations (:mod:`noeta.client.tasks`), reading tasks and answering
    approvals (:mod:`noeta.client.inspection`), on a connection (:mod:`noeta.client._base`)."""

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


# Names that were defined (or imported for callers) here before the client was split.
__all__ = [
    "DEFAULT_PROVIDER",
    "METADATA_QUERY",
    "SERVER_OUTAGE_WAIT_SECONDS",
    "SERVER_UNREACHABLE",
    "AsyncClient",
    "ClientBase",
    "PendingApproval",
    "TaskInfo",
    "TaskSummary",
    "connect_temporal",
    "register_search_attributes",
    "registered_search_attributes",
    "search_attributes_registered",
]
