"""The worker's thread pools: every call's outcome reaches its caller, calls beyond the pool's
size queue (or, bounded, fail typed), and the counts an operator reads stay true through
cancellations and shutdown."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading

import pytest

from noeta.activities._threads import ThreadPool
from noeta.errors import WorkerBusyError
from tests.support.waiting import eventually

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def _pool_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"noeta-{name}-")]


async def test_calls_beyond_the_pool_size_queue_and_each_gets_its_own_outcome() -> None:
    pool = ThreadPool(3, "queueing")
    running = 0
    most = 0
    lock = threading.Lock()
    gate = threading.Event()

    def work(n: int) -> tuple[int, str]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        gate.wait(5)
        with lock:
            running -= 1
        if n % 7 == 0:
            raise ValueError(f"call {n}")
        return n * n, REQUEST.get()

    async def call(n: int) -> tuple[int, str]:
        REQUEST.set(f"request-{n}")  # each caller's context goes with its call
        return await pool.run(work, n)

    calls = [asyncio.ensure_future(call(n)) for n in range(40)]
    await asyncio.sleep(0.2)
    assert pool.stats() == {"size": 3, "busy": 40, "abandoned": 0}  # 3 running, 37 queued in order
    gate.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10)
    for n, outcome in enumerate(outcomes):
        if n % 7 == 0:
            assert isinstance(outcome, ValueError) and str(outcome) == f"call {n}"
        else:
            assert outcome == (n * n, f"request-{n}")
    assert most == 3 and len(_pool_threads("queueing")) == 3
    assert pool.stats() == {"size": 3, "busy": 0, "abandoned": 0}
    pool.close()


async def test_a_bounded_call_waits_for_a_thread_then_fails_typed() -> None:
    pool = ThreadPool(1, "bounded", "NOETA_SYNC_TOOL_THREADS")
    release = threading.Event()
    held = asyncio.ensure_future(pool.run(release.wait, 5))
    await asyncio.sleep(0.05)
    with pytest.raises(WorkerBusyError, match=r"all 1 bounded threads of this worker are busy .*NOETA_SYNC_TOOL_THREADS"):
        await pool.run(int, "1", wait_seconds=0.1)
    assert pool.stats()["busy"] == 1  # the refused call took nothing
    waiting = asyncio.ensure_future(pool.run(int, "2", wait_seconds=5))
    await asyncio.sleep(0.05)
    release.set()
    assert await asyncio.wait_for(held, 10) is True and await asyncio.wait_for(waiting, 10) == 2
    assert pool.stats() == {"size": 1, "busy": 0, "abandoned": 0}
    pool.close()


async def test_a_cancelled_call_is_counted_abandoned_until_its_thread_returns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="noeta.worker.threads")
    pool = ThreadPool(2, "abandoning")
    started = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def hung() -> str:
        started.set()
        release.wait(30)
        finished.set()
        return "late"

    call = asyncio.ensure_future(pool.run(hung, label="hung_tool"))
    assert await asyncio.to_thread(started.wait, 30)  # its thread runs it (a loaded machine may take a while)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert pool.stats() == {"size": 2, "busy": 1, "abandoned": 1}
    assert await pool.run(str, 5) == "5"  # the other thread still serves
    release.set()
    await asyncio.to_thread(finished.wait, 30)
    await eventually(lambda: pool.stats()["busy"] == 0, timeout=30, interval=0.01)
    assert pool.stats() == {"size": 2, "busy": 0, "abandoned": 0}
    messages = [r.getMessage() for r in caplog.records]
    assert any("hung_tool is still running after its attempt ended" in m and "1 held by such calls" in m for m in messages)
    assert any("hung_tool returned after" in m for m in messages)
    pool.close()


async def test_close_lets_idle_threads_go_and_a_later_call_still_runs() -> None:
    pool = ThreadPool(2, "closing")
    await asyncio.gather(pool.run(int, "1"), pool.run(int, "2"))
    assert len(_pool_threads("closing")) >= 1
    pool.close()
    await eventually(lambda: not _pool_threads("closing"), timeout=1, interval=0.01)
    assert await pool.run(int, "3") == 3  # a new thread, which leaves once its call returns
    await eventually(lambda: not _pool_threads("closing"), timeout=1, interval=0.01)


async def test_calls_queued_behind_busy_threads_still_run_after_close() -> None:
    pool = ThreadPool(1, "draining")
    gate = threading.Event()
    first = asyncio.ensure_future(pool.run(gate.wait, 5))
    queued = [asyncio.ensure_future(pool.run(int, str(n))) for n in range(3)]
    await asyncio.sleep(0.05)
    pool.close()  # the busy thread takes the queued calls before it leaves
    gate.set()
    assert await asyncio.wait_for(first, 10) is True
    assert await asyncio.wait_for(asyncio.gather(*queued), 10) == [0, 1, 2]
    await eventually(lambda: not _pool_threads("draining"), timeout=1, interval=0.01)
