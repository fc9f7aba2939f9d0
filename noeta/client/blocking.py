"""Running the AsyncClient's calls from synchronous code: :class:`~noeta.client.sync.Client`'s
event loop and the AsyncClient on it (:class:`SyncSession`), and the client's blocking calls, each
the AsyncClient's coroutine method run to its end (:class:`Blocking`).

``start = Blocking(AsyncClient.start)`` gives the synchronous client the asynchronous one's exact
signature and docstring, stated once: mypy checks ``client.start(goal, agent=...)`` against
AsyncClient.start, and a keyword added there is the synchronous client's too.

The session is an object of its own rather than the Client's attributes: a blocking call reaches
the AsyncClient through it, and holding the client itself, or a bound method of it, would make a
reference cycle. The AsyncClient, and through it the Temporal runtime's threads, must go when the
client closes, not at the next garbage collection (tests/test_clean_exit.py); closing clears it
here, the one place that holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from noeta.client.client import AsyncClient
from noeta.client.forwarding import FacadeCall
from noeta.client.runtime import clear_finished_frames

P = ParamSpec("P")
R = TypeVar("R")
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


class Blocking(FacadeCall[P, R]):
    """The AsyncClient's coroutine method ``method`` as a blocking method of a facade whose
    ``_session`` is a :class:`SyncSession`."""

    def __init__(self, method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]) -> None:
        """``method``: AsyncClient's, taken from the class (``AsyncClient.start``)."""
        super().__init__(method)

    def bind(self, facade: Any) -> Callable[P, R]:
        """The call, run on ``facade``'s session: it holds the session, never the facade."""
        session: SyncSession = facade._session
        name = self.__name__

        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            coro: Coroutine[Any, Any, R] = getattr(session.aio, name)(*args, **kwargs)
            return session.run(coro)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = self.__doc__
        return call


__all__ = ["Blocking", "SyncSession"]
