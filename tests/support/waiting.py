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
