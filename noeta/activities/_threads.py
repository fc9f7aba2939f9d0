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
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from noeta.activities._activity_lease import lease
from noeta.errors import WorkerBusyError

logger = logging.getLogger("noeta.worker.threads")

#: How often a caller waiting for a free thread looks again.
_POLL_SECONDS = 0.02


class _Job:
    """One call's bookkeeping, shared by its caller and its thread; what the thread runs travels
    beside it on the queue, so the caller's job holds nothing of the call once the thread is done."""

    __slots__ = ("loop", "future", "label", "started", "abandoned", "finished")

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], label: str) -> None:
        self.loop, self.future, self.label = loop, future, label
        self.started = 0.0
        self.abandoned = False
        self.finished = False


#: What a thread takes from the queue: the job, and the function, arguments and context it runs;
#: None tells an idle thread to exit (see ThreadPool.close).
_Call = tuple[_Job, Callable[..., Any], tuple[Any, ...], contextvars.Context]
_STOP = None


def _deliver(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """On the caller's loop: the call's outcome, unless the caller stopped waiting (cancelled)."""
    if future.done():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


class ThreadPool:
    """At most ``size`` daemon threads, started on demand and reused.

    A call is a trip to a thread and back, which activities make on every step, so the trip is kept
    to one queue put, one lock per side and one ``call_soon_threadsafe``: no ``concurrent.futures``
    future (its condition variable), no ``threading.Semaphore`` (another), and calls that may wait
    as long as it takes queue in order instead of polling for a free thread."""

    def __init__(self, size: int, name: str, setting: str = "") -> None:
        self.size, self.name, self.setting = size, name, setting
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards the counts below
        self._busy = 0  # calls holding a slot: queued or running
        self._abandoned = 0
        self._threads = 0
        self._idle = 0
        self._backlog = 0  # calls queued while every thread was busy
        self._closed = False

    # -- counts -----------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"size": self.size, "busy": self._busy, "abandoned": self._abandoned}

    # -- running work -------------------------------------------------------------------------------

    async def run(self, fn: Callable[..., Any], *args: Any, label: str = "", wait_seconds: float | None = None) -> Any:
        """``fn(*args)`` on a thread of this pool. With ``wait_seconds``, waits that long at most
        for a free thread, then raises WorkerBusyError; without, queues behind the calls before it."""
        loop = asyncio.get_running_loop()
        if not self._take_slot(bounded=wait_seconds is not None):
            await self._wait_for_slot(loop, wait_seconds)
        # With the caller's context, as asyncio.to_thread does: activity.heartbeat and the content
        # store's owner (noeta.context.ownership) need the activity's.
        job = _Job(loop, loop.create_future(), label)
        context = contextvars.copy_context()
        leased = lease(context)  # what the thread sees of the activity, let go of when abandoned
        self._start((job, fn, args, context))
        del context
        try:
            return await job.future
        except asyncio.CancelledError:
            if leased is not None:
                leased.end()  # the call runs on, but no longer holds the worker and its runtime
            self._abandon(job)  # the call itself runs on: a thread cannot be stopped
            raise

    def _take_slot(self, bounded: bool = True) -> bool:
        with self._lock:
            if bounded and self._busy >= self.size:
                return False
            self._busy += 1
            return True

    async def _wait_for_slot(self, loop: asyncio.AbstractEventLoop, wait_seconds: float | None) -> None:
        deadline = None if wait_seconds is None else loop.time() + wait_seconds
        while not self._take_slot():
            if deadline is not None and loop.time() >= deadline:
                stats = self.stats()
                raise WorkerBusyError(
                    f"all {self.size} {self.name} threads of this worker are busy ({stats['abandoned']} held by "
                    f"calls whose attempt already ended); raise {self.setting or 'the pool size'} or fix the "
                    "tool that hangs"
                )
            await asyncio.sleep(_POLL_SECONDS)

    def _start(self, call: _Call) -> None:
        with self._lock:
            spawn = False
            if self._idle:
                self._idle -= 1  # an idle thread takes it
            elif self._threads < self.size:
                self._threads += 1
                spawn = True
            else:
                self._backlog += 1  # the next thread to finish its call takes it
        self._queue.put(call)
        if spawn:
            threading.Thread(target=self._serve, name=f"noeta-{self.name}-{self._threads}", daemon=True).start()

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
            call = self._queue.get()
            if call is _STOP:
                return
            job, fn, args, context = call
            del call
            job.started = time.monotonic()
            value: Any = None
            error: BaseException | None = None
            try:
                value = context.run(fn, *args)
            except BaseException as exc:  # handed to the awaiting caller
                error = exc
            # The caller is woken once this thread holds nothing of the call: its context holds the
            # activity, and through it the worker and the Temporal runtime that the worker's owner
            # frees as soon as the worker stops (noeta.client.runtime).
            del fn, args, context
            with self._lock:
                job.finished = True
                abandoned = job.abandoned
                if abandoned:
                    self._abandoned -= 1
                self._busy -= 1
                leave = False
                if self._backlog:
                    self._backlog -= 1  # a queued call: this thread takes it next
                elif self._closed:
                    self._threads -= 1
                    leave = True
                else:
                    self._idle += 1
            loop, future, label, started = job.loop, job.future, job.label, job.started
            del job
            if not abandoned:
                try:
                    loop.call_soon_threadsafe(_deliver, future, value, error)
                except RuntimeError:  # the loop is closed: nobody waits for this call any more
                    pass
            del value, error, future, loop
            if abandoned:
                logger.warning(
                    "%s call %s returned after %.1f s, long after its attempt ended; its thread is free again",
                    self.name, label, time.monotonic() - started,
                )
            if leave:
                return

    def _abandon(self, job: _Job) -> None:
        with self._lock:
            if job.finished:
                return  # it returned meanwhile; its outcome just has no one to go to
            job.abandoned = True
            self._abandoned += 1
        stats = self.stats()
        logger.warning(
            "%s call %s is still running after its attempt ended; it keeps its thread until it returns "
            "(%d of %d %s threads busy, %d held by such calls)",
            self.name, job.label, stats["busy"], self.size, self.name, stats["abandoned"],
        )
