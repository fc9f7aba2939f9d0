"""Observers: following the event logs of the tasks a client starts and calling its observers on
each envelope, until the task ends or the client closes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from temporalio.client import Client as TemporalClient

from noeta.client.events import EventStream, notify
from noeta.protocols.event_log import Observer


class Observation:
    """The client's observers and the followers running for them, one per task started."""

    def __init__(self, temporal: TemporalClient, observers: Sequence[Observer] = ()) -> None:
        """``observers`` are called with every envelope of the tasks started through ``temporal``'s client."""
        self.temporal = temporal
        self._observers = list(observers)
        self.following: dict[str, asyncio.Task[int]] = {}
        """The follower of each task started with observers, until its caller has waited for it."""

    @property
    def observers(self) -> list[Observer]:
        """Called with every envelope of every task this client starts."""
        return self._observers

    @observers.setter
    def observers(self, observers: Sequence[Observer]) -> None:
        self._observers = list(observers)

    async def observe(self, task_id: str, observers: Sequence[Observer], after_seq: int = 0) -> int:
        """Call each observer once per envelope, in order, until the task ends."""
        stream = EventStream(self.temporal, task_id, after_seq=after_seq, follow=True)
        return await notify(stream, observers)

    def follow(self, task_id: str, observers: Sequence[Observer] = ()) -> None:
        """Start following a task just started for the client's observers and ``observers``
        (nothing to do when there are none)."""
        everyone = [*self.observers, *observers]
        if everyone:
            self.following[task_id] = asyncio.create_task(self.observe(task_id, everyone))

    async def observed(self, task_id: str) -> int:
        """Wait until the observers of a task this client started have seen its last envelope."""
        task = self.following.pop(task_id, None)
        return await task if task is not None else 0

    async def close(self) -> None:
        """Stop following every task."""
        followers = list(self.following.values())
        for follower in followers:
            follower.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        self.following.clear()
