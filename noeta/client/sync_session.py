"""What the synchronous client's calls run on: its event loop (run by a thread of its own) and the
AsyncClient connected on that loop.

An object of its own rather than the :class:`~noeta.client.sync.Client`'s attributes: the client's
parts (its schedule calls) run their calls through it, and a part holding the client itself, or a
bound method of it, would make a reference cycle. The AsyncClient, and through it the Temporal
runtime's threads, must go when the client closes, not at the next garbage collection
(tests/test_clean_exit.py); closing clears it here, the one place that holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from noeta.client.client import AsyncClient
from noeta.client.runtime import clear_finished_frames

T = TypeVar("T")


class SyncSession:
    """The loop (running on another thread) and, once connected until closed, the AsyncClient."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """``loop``: the client's loop, run forever by its thread until the client closes."""
        self.loop = loop
        self.client: AsyncClient | None = None
        """The AsyncClient on ``loop`` (None before it connected and after it closed)."""

    @property
    def aio(self) -> AsyncClient:
        """The AsyncClient; RuntimeError once the client is closed."""
        if self.client is None:
            raise RuntimeError("this Client is closed")
        return self.client

    def run(self, coro: Coroutine[Any, Any, T], /) -> T:
        """Run ``coro`` on the loop and wait: its result, or its exception without the client's
        call frames; RuntimeError once the loop is closed."""
        if self.loop.is_closed():
            coro.close()
            raise RuntimeError("this Client is closed")
        try:
            return asyncio.run_coroutine_threadsafe(coro, self.loop).result()
        except BaseException as err:
            clear_finished_frames(err)  # the caller gets the error, not the client's call frames
            raise


__all__ = ["SyncSession"]
