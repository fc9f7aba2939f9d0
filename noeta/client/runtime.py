"""The Temporal runtime that Noeta's synchronous entry points share, stopped by an exit hook
while the interpreter is still fully alive.

Every temporalio client and worker runs on a Runtime: a pool of native (Tokio) threads that call
into Python to complete each awaited call, including calls whose Python side was cancelled or
dropped. A pool that is still up when the interpreter finalizes can have a thread call in then;
Python makes that thread exit in the middle of the call and the process aborts ("Fatal Python
error: PyGILState_Release: thread state ... must be current when releasing ... finalizing").
temporalio stops a runtime safely (detached from the interpreter, so threads waiting to call in
finish first, then the pool's threads are joined) when its last reference goes away in a live
interpreter; its default runtime, though, is a module global that only goes away during
finalization, where that safe path is skipped.

So ``query()`` and the synchronous ``Client`` run on one runtime per process (:func:`shared_runtime`),
never on temporalio's default, and stop it in one place: an exit hook, which runs before
finalization, closes every ``Client`` left open and then drops the runtime (:func:`release`).
Stopping a runtime after each call instead (as Noeta once did) made every call's end race the
runtime's own threads: a thread finishing the worker's last poll holds the awaiting future, and
through it the worker, its client and the runtime, a moment after the awaiting side returned, and
on a loaded machine one release in a few hundred waited its full bound and left the threads
running. One runtime per process has one release, after the script's work, and no call pays for a
runtime's start and a full collection. A runtime passed in ``HostConfig.runtime`` is the caller's.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import dataclasses
import functools
import gc
import logging
import os
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, Protocol, TypeVar

from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime, TelemetryConfig

from noeta.client.host import HostConfig

T = TypeVar("T")
P = ParamSpec("P")


class Closable(Protocol):
    def close(self) -> None: ...


logger = logging.getLogger("noeta.client.runtime")

#: How long release() waits for a runtime thread to let go of its last reference.
RELEASE_SECONDS = 10.0
_RELEASE_POLL_SECONDS = 0.005

_open: weakref.WeakSet[Closable] = weakref.WeakSet()
_lock = threading.Lock()
_hook_registered = False
#: The process's shared runtime and the pid that made it (a forked child makes its own: a runtime
#: cannot be used across a fork).
_shared: tuple[Runtime, int] | None = None


def shared_runtime() -> Runtime:
    """This process's runtime for ``query()`` and the synchronous ``Client``, made on first use and
    stopped by the exit hook (after it has closed the clients still open)."""
    global _shared
    _register_exit_hook()
    with _lock:
        if _shared is None or _shared[1] != os.getpid():
            _shared = (Runtime(telemetry=TelemetryConfig()), os.getpid())
        return _shared[0]


def with_shared_runtime(host: HostConfig) -> HostConfig:
    """``host`` on the process's shared runtime unless it names a runtime of its own."""
    return host if host.runtime is not None else dataclasses.replace(host, runtime=shared_runtime())


def close_at_exit(owner: Closable) -> None:
    """Close ``owner`` from the exit hook unless it was closed (or collected) before."""
    _register_exit_hook()
    _open.add(owner)


def closed(owner: Closable) -> None:
    """Forget ``owner``: it closed itself, so the exit hook must not close it again."""
    _open.discard(owner)


def release(runtime: weakref.ref[Runtime]) -> bool:
    """Free ``runtime``, whose owner has just dropped its references to it; returns True once it
    is gone (its threads joined), or False after RELEASE_SECONDS with a warning.

    Clients and workers hold their runtime in reference cycles, so a collection is what drops
    the last reference (and stops the runtime, joining its threads); a runtime thread finishing
    its last call into Python can still hold a way to it for a moment, so collect until gone.
    """
    deadline = time.monotonic() + RELEASE_SECONDS
    drop_deferred_references()
    gc.collect()
    while runtime() is not None:
        if time.monotonic() >= deadline:
            logger.warning("a Temporal runtime of Noeta's is still referenced %.0f s after its owner "
                           "let it go; its threads stay until the next collection (held by: %s)",
                           RELEASE_SECONDS, holders(runtime()))
            return False
        time.sleep(_RELEASE_POLL_SECONDS)
        drop_deferred_references()
        gc.collect()
    return True


def drop_deferred_references() -> None:
    """Let temporalio's native bridge drop the references to Python objects that its own threads
    let go of while not holding the GIL.

    The bridge (built with PyO3) cannot decrement a reference count on a thread that does not hold
    the GIL, so it queues the decrement until a thread next calls into the bridge. A runtime thread
    finishing a call (the activity worker's last poll, answered with the worker's shutdown) lets go
    of the call's Python future that way. That future holds its exception, whose traceback holds the
    frames of the worker's poll loop, and through them the worker, its client and the runtime. After
    a script's last call into Temporal nothing calls into the bridge again, so the queued decrements
    stayed queued and the runtime stayed referenced (about one script in a few hundred, when the
    last poll's answer came after the script's last call). Any call into the bridge drains the
    queue; parsing an empty client configuration is the cheapest one, and touches nothing."""
    ClientConfig.load(config_source=b"", override_env_vars={})


def holders(target: object, depth: int = 4, width: int = 6) -> str:
    """What refers to ``target``, a few levels out (type names, frames by function and line), for
    the warning of a release that timed out: the one clue to what still holds a runtime."""
    found: list[str] = []
    seen = {id(found), id(target)}
    level: list[object] = [target]
    for _ in range(depth):
        nxt: list[object] = []
        for obj in level:
            for ref in gc.get_referrers(obj)[:width]:
                if id(ref) in seen or ref is level or ref is nxt:
                    continue
                seen.add(id(ref))
                code = getattr(ref, "f_code", None)
                found.append(f"{code.co_name}:{getattr(ref, 'f_lineno', '?')}" if code else type(ref).__name__)
                nxt.append(ref)
        level = nxt
        found.append("|")
    return " ".join(found).strip(" |")


def clear_finished_frames(error: BaseException | None) -> None:
    """Clear the locals of the finished frames in ``error``'s traceback (and its causes'), keeping
    their file and line entries: an error on its way out of ``query()`` or a ``Client`` call would
    otherwise keep the call's worker, client and runtime alive for as long as it is kept; the
    interpreter keeps the last uncaught one (``sys.last_value``) until it finalizes."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        err = pending.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        if err.__traceback__ is not None:
            traceback.clear_frames(err.__traceback__)  # skips frames still executing
        pending += [err.__cause__, err.__context__]
        if isinstance(err, BaseExceptionGroup):
            pending += list(err.exceptions)


def _register_exit_hook() -> None:
    global _hook_registered
    with _lock:
        if not _hook_registered:
            atexit.register(_stop_at_exit)
            _hook_registered = True


def _stop_at_exit() -> None:
    """Exit hooks run before finalization starts: the last moment a runtime can stop safely."""
    global _shared
    # An uncaught error's traceback was printed; its frames would hold a client to the runtime.
    clear_finished_frames(getattr(sys, "last_value", None))
    for owner in list(_open):
        try:
            owner.close()
        except Exception:  # noqa: BLE001  (leaving anyway: one owner's failure must not keep the rest open)
            pass
    with _lock:
        shared, _shared = _shared, None
    if shared is not None:
        alive = weakref.ref(shared[0])
        del shared
        release(alive)
    else:
        gc.collect()


def run_to_end(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end from synchronous code (``query``, ``evaluate``, ``replay``): on an
    event loop of its own, in a helper thread when this thread already runs one. Either way it sees
    this thread's context variables (``run_with`` resources among them), as ``asyncio.run`` gives them."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(contextvars.copy_context().run, asyncio.run, coro).result()


def blocking_twin(async_twin: Callable[P, Coroutine[Any, Any, T]], doc: str) -> Callable[P, T]:
    """The synchronous entry point of ``async_twin`` (``query`` of ``aquery``): the same parameters,
    run to its end by :func:`run_to_end` with its ``host=`` on the process's shared runtime, never
    temporalio's default (which would still be running when the interpreter finalizes)."""

    @functools.wraps(async_twin)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> T:
        # No local of this frame holds the shared runtime: an error's traceback keeps this frame.
        try:
            return run_to_end(async_twin(*args, **_on_shared_runtime(kwargs)))
        except BaseException as err:
            clear_finished_frames(err)  # the caller gets the error, not the call's workers and clients
            raise

    blocking.__name__ = blocking.__qualname__ = async_twin.__name__.removeprefix("a")
    blocking.__doc__ = doc
    return blocking


def _on_shared_runtime(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**kwargs, "host": with_shared_runtime(kwargs.get("host") or HostConfig())}


__all__ = [
    "blocking_twin", "clear_finished_frames", "close_at_exit", "closed", "drop_deferred_references", "holders",
    "release", "run_to_end", "shared_runtime", "with_shared_runtime",
]
