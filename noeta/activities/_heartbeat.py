"""Keep an activity's heartbeat going while it awaits something slow.

Cancellation and worker death reach a running activity only through heartbeats, so every long
call (a model request, a tool) runs under :func:`with_heartbeat`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

T = TypeVar("T")


def heartbeat_interval(default: float = 10.0) -> float:
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        return default
    return max(0.2, min(default, timeout.total_seconds() / 3))


async def with_heartbeat(work: Awaitable[T], *details: object) -> T:
    task = asyncio.ensure_future(work)
    interval = heartbeat_interval()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval)
            if done:
                return task.result()
            activity.heartbeat(*details)
    finally:
        if not task.done():
            task.cancel()
