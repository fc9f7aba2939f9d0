"""Bounded pools of daemon threads for synchronous user code and content-store I/O.

Why not ``ThreadPoolExecutor``: a synchronous tool that hangs holds its thread for good (Python
cannot stop a thread), and the stdlib pool's threads are joined at interpreter exit, so one hung
tool kept a stopped worker process alive forever. These threads are daemons that nothing joins.

What the operator gets instead of a silent queue:

- a call that finds every thread busy waits at most ``wait_seconds`` for one, then fails with
  :class:`~noeta.errors.WorkerBusyError` (a rate-limit-like wait for the attempt ledger: retried
  after a delay, on this worker or another, without using up the call's retries);
- a call whose attempt ended (timed out, cancelled) while its thread still runs is *abandoned*:
  logged once as a warning with the pool's counts, and logged again when its thread comes back;
- :meth:`ThreadPool.stats` gives ``size / busy / abandoned`` for health checks.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from noeta.errors import WorkerBusyError

logger = logging.getLogger("noeta.worker.threads")

#: How often a caller waiting for a free thread looks again.
_POLL_SECONDS = 0.02


@dataclass
class _Job:
    fn: Callable[[], Any]
    future: Future[Any]
    label: str
    started: float = 0.0
    abandoned: bool = False


#: Tells an idle thread to exit (see ThreadPool.close).
_STOP = _Job(lambda: None, Future(), "stop")


class ThreadPool:
    """At most ``size`` daemon threads, started on demand and reused."""

    def __init__(self, size: int, name: str, setting: str = "") -> None:
        self.size, self.name, self.setting = size, name, setting
        self._slots = threading.BoundedSemaphore(size)
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._running: dict[int, _Job] = {}
        self._ids = itertools.count(1)
        self._closed = False

    # -- counts -----------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        with self._lock:
            busy = len(self._running)
            abandoned = sum(1 for job in self._running.values() if job.abandoned)
        return {"size": self.size, "busy": busy, "abandoned": abandoned}

    # -- running work -------------------------------------------------------------------------------

    async def run(self, fn: Callable[..., Any], *args: Any, label: str = "", wait_seconds: float | None = None) -> Any:
        """``fn(*args)`` on a thread of this pool. Waits for a free thread up to ``wait_seconds``
        (None: as long as it takes), then raises WorkerBusyError."""
        await self._acquire(wait_seconds)
        # With the caller's context, as asyncio.to_thread does: activity.heartbeat and the content
        # store's owner (noeta.context.ownership) need the activity's.
        context = contextvars.copy_context()
        job = self._start(lambda: context.run(fn, *args), label)
        try:
            return await asyncio.shield(asyncio.wrap_future(job.future))
        except asyncio.CancelledError:
            if not job.future.done():
                self._abandon(job)
            raise

    async def _acquire(self, wait_seconds: float | None) -> None:
        if self._slots.acquire(blocking=False):
            return
        loop = asyncio.get_running_loop()
        deadline = None if wait_seconds is None else loop.time() + wait_seconds
        while not self._slots.acquire(blocking=False):
            if deadline is not None and loop.time() >= deadline:
                stats = self.stats()
                raise WorkerBusyError(
                    f"all {self.size} {self.name} threads of this worker are busy ({stats['abandoned']} held by "
                    f"calls whose attempt already ended); raise {self.setting or 'the pool size'} or fix the "
                    "tool that hangs"
                )
            await asyncio.sleep(_POLL_SECONDS)

    def _start(self, fn: Callable[[], Any], label: str) -> _Job:
        job = _Job(fn, Future(), label)
        with self._lock:
            spawn = self._idle == 0 and self._threads < self.size
            if spawn:
                self._threads += 1
            else:
                self._idle -= 1
        self._queue.put(job)
        if spawn:
            threading.Thread(target=self._serve, name=f"noeta-{self.name}-{self._threads}", daemon=True).start()
        return job

    def close(self) -> None:
        """Let the threads go: idle ones exit now, busy ones when their call returns. A call
        started later gets a new thread."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
            self._threads -= idle
        for _ in range(idle):
            self._queue.put(_STOP)

    def _serve(self) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            key = next(self._ids)
            job.started = time.monotonic()
            with self._lock:
                self._running[key] = job
            fn, future, label, started = job.fn, job.future, job.label, job.started
            del job
            value: Any = None
            error: BaseException | None = None
            if future.set_running_or_notify_cancel():
                try:
                    value = fn()
                except BaseException as exc:  # handed to the awaiting caller
                    error = exc
            del fn
            with self._lock:
                abandoned = self._running.pop(key).abandoned
                leave = self._closed
                if leave:
                    self._threads -= 1
                else:
                    self._idle += 1
            self._slots.release()
            # The caller is woken once this thread holds nothing of the call: its context holds the
            # activity, and through it the worker and the Temporal runtime that the worker's owner
            # frees as soon as the worker stops (noeta.client.runtime).
            if not future.done():
                if error is None:
                    future.set_result(value)
                else:
                    future.set_exception(error)
            del value, error, future
            if abandoned:
                logger.warning(
                    "%s call %s returned after %.1f s, long after its attempt ended; its thread is free again",
                    self.name, label, time.monotonic() - started,
                )
            if leave:
                return

    def _abandon(self, job: _Job) -> None:
        job.abandoned = True
        stats = self.stats()
        logger.warning(
            "%s call %s is still running after its attempt ended; it keeps its thread until it returns "
            "(%d of %d %s threads busy, %d held by such calls)",
            self.name, job.label, stats["busy"], self.size, self.name, stats["abandoned"],
        )
