"""Keep an activity's heartbeat going while it awaits something slow, until the attempt's deadline.

Cancellation and worker death reach a running activity only through heartbeats, so every long
call (a model request, a tool) runs under :func:`with_heartbeat`.

The deadline: an attempt that Temporal times out leaves no trace of why, and is counted as lost.
So the worker stops the work a little before the attempt's start-to-close timeout and records a
timeout failure itself (``AttemptTimedOut``), which the attempt ledger counts and the event log
shows. A hung synchronous tool keeps its thread (a thread cannot be stopped); the pool accounts
for it (see noeta.activities._threads).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

T = TypeVar("T")


class AttemptTimedOut(Exception):
    """The work did not finish within the attempt's time."""

    def __init__(self) -> None:
        timeout = activity.info().start_to_close_timeout
        self.seconds = timeout.total_seconds() if timeout is not None else 0.0
        """The attempt's start-to-close timeout (the option the user set)."""
        super().__init__(f"did not finish within {self.seconds:g} s")


def beat(*details: object) -> None:
    """``activity.heartbeat``, except in a local activity (a local tool), which cannot heartbeat:
    its worker would only log that the heartbeat went nowhere."""
    if not activity.info().is_local:
        activity.heartbeat(*details)


def heartbeat_interval(default: float = 10.0) -> float:
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        return default
    return max(0.2, min(default, timeout.total_seconds() / 3))


def attempt_seconds() -> float | None:
    """How long this attempt's work may run: its start-to-close timeout less a margin (a quarter,
    at most 2 s) in which the worker records the timeout before Temporal's own timer fires. (A
    worker too loaded to do it in the margin loses the attempt instead: retried, not counted.)"""
    timeout = activity.info().start_to_close_timeout
    if timeout is None:
        return None
    total = timeout.total_seconds()
    return max(0.05, total - min(2.0, total / 4))


async def with_heartbeat(work: Awaitable[T], *details: object, seconds: float | None = None) -> T:
    """Await ``work`` while heartbeating ``details``; past ``seconds`` cancel it and raise
    :class:`AttemptTimedOut`."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    interval = heartbeat_interval()
    deadline = None if seconds is None else loop.time() + seconds
    try:
        while True:
            wait = interval if deadline is None else min(interval, deadline - loop.time())
            if wait <= 0:
                raise AttemptTimedOut()
            done, _ = await asyncio.wait({task}, timeout=wait)
            if done:
                return task.result()
            beat(*details)
    finally:
        if not task.done():
            task.cancel()
