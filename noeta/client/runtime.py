"""Temporal runtimes that Noeta owns, shut down while the interpreter is still fully alive.

Every temporalio client and worker runs on a Runtime: a pool of native (Tokio) threads that call
into Python to complete each awaited call, including calls whose Python side was cancelled or
dropped. A pool that is still up when the interpreter finalizes can have a thread call in then;
Python makes that thread exit in the middle of the call and the process aborts ("Fatal Python
error: PyGILState_Release: thread state ... must be current when releasing ... finalizing").
temporalio stops a runtime safely (detached from the interpreter, so threads waiting to call in
finish first, then the pool's threads are joined) when its last reference goes away in a live
interpreter; its default runtime, though, is a module global that only goes away during
finalization, where that safe path is skipped.

So ``query()`` and the synchronous ``Client`` run on a runtime of their own and drop every
reference to it when they are done: ``query()`` before it returns (or raises), ``Client`` at
``close()``; an exit hook closes a ``Client`` left open. Afterwards none of its threads is left to
call into a finalizing interpreter. A runtime passed in ``HostConfig.runtime`` is the caller's.

Dropping is not always done at the first collection: a runtime thread finishing its last call
into Python (the worker's final poll, answered "shut down") can still hold a reference to the
awaiting future, and through it the worker, its client and the runtime, a moment after the
awaiting side has returned. So the owner keeps a weak reference and :func:`release` collects
again until the runtime is gone.
"""

from __future__ import annotations

import atexit
import dataclasses
import gc
import logging
import threading
import time
import traceback
import weakref
from typing import Protocol

from temporalio.runtime import Runtime, TelemetryConfig

from noeta.client.host import HostConfig


class Closable(Protocol):
    def close(self) -> None: ...


logger = logging.getLogger("noeta.client.runtime")

#: How long release() waits for a runtime thread to let go of its last reference.
RELEASE_SECONDS = 10.0
_RELEASE_POLL_SECONDS = 0.005

_open: weakref.WeakSet[Closable] = weakref.WeakSet()
_hook_lock = threading.Lock()
_hook_registered = False


def private_runtime() -> tuple[Runtime, weakref.ref[Runtime]]:
    """A runtime configured like temporalio's default, for one owner to drop when done, and the
    weak reference the owner keeps to hand to :func:`release`."""
    _register_exit_hook()
    runtime = Runtime(telemetry=TelemetryConfig())
    return runtime, weakref.ref(runtime)


def with_own_runtime(host: HostConfig) -> tuple[HostConfig, weakref.ref[Runtime] | None]:
    """``host`` with a private runtime unless it names one, and the weak reference its owner
    hands to :func:`release` (None: the runtime is the caller's to drop)."""
    if host.runtime is not None:
        return host, None
    runtime, alive = private_runtime()
    return dataclasses.replace(host, runtime=runtime), alive


def close_at_exit(owner: Closable) -> None:
    """Close ``owner`` from the exit hook unless it was closed (or collected) before."""
    _register_exit_hook()
    _open.add(owner)


def closed(owner: Closable) -> None:
    _open.discard(owner)


def release(runtime: weakref.ref[Runtime], error: BaseException | None = None) -> None:
    """Free ``runtime``, whose owner has just dropped its references to it; returns once it is
    gone (its threads joined), or after RELEASE_SECONDS with a warning.

    Clients and workers hold their runtime in reference cycles, so a collection is what drops
    the last reference (and stops the runtime, joining its threads). ``error``, on its way out to
    the caller, would keep the runtime alive through the locals of the finished frames in its
    traceback (a workflow handle holds the client): those locals are cleared, file and line
    entries stay.
    """
    if error is not None:
        _clear_locals(error)
    deadline = time.monotonic() + RELEASE_SECONDS
    gc.collect()
    while runtime() is not None:  # a runtime thread still held a way to it (see the module's doc)
        if time.monotonic() >= deadline:
            logger.warning("a Temporal runtime of Noeta's is still referenced %.0f s after its owner "
                           "let it go; its threads stay until the next collection", RELEASE_SECONDS)
            return
        time.sleep(_RELEASE_POLL_SECONDS)
        gc.collect()


def _clear_locals(error: BaseException) -> None:
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


def _register_exit_hook() -> None:
    global _hook_registered
    with _hook_lock:
        if not _hook_registered:
            atexit.register(_close_open_owners)
            _hook_registered = True


def _close_open_owners() -> None:
    # Exit hooks run before finalization starts: the last moment a runtime can stop safely.
    for owner in list(_open):
        try:
            owner.close()
        except Exception:  # noqa: BLE001  (leaving anyway: one owner's failure must not keep the rest open)
            pass
    gc.collect()


__all__ = ["close_at_exit", "closed", "private_runtime", "release", "with_own_runtime"]
