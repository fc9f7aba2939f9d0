"""Polling for conditions that become true asynchronously (never a fixed sleep)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable


async def eventually(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05) -> None:
    """Wait until ``predicate()`` (sync or async) is truthy; fail after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        assert asyncio.get_running_loop().time() < deadline, f"condition not met within {timeout}s"
        await asyncio.sleep(interval)


async def until_a_reader_listens(temporal: Any, task_id: str, timeout: float = 30.0) -> None:
    """Wait until a reader of ``task_id``'s delta stream has said it listens (its lease is recorded
    by the workflow): pieces streamed from then on are published."""
    from noeta.protocols.names import QUERY_STREAM_LISTENING

    handle = temporal.get_workflow_handle(task_id)

    async def listening() -> bool:
        return bool(await handle.query(QUERY_STREAM_LISTENING, result_type=float) > 0)

    await eventually(listening, timeout=timeout)
