"""A worker process's life: serve until SIGTERM or SIGINT, then stop gracefully.

On the first signal the worker stops polling and the activities already running get the grace
period (``Worker(graceful_shutdown_timeout=...)``, ``NOETA_SHUTDOWN_GRACE_SECONDS``) to finish and
report their results, so a tool that ends in time is never run again on another worker. What is
still running when the grace period ends is cancelled and retried by Temporal elsewhere. The
process then exits 0: a rolling deploy is a normal stop. A second signal leaves at once (an
operator pressing Ctrl-C twice); Temporal retries the interrupted calls after their heartbeat
timeout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

from temporalio.worker import Worker

from noeta.cli.health import HealthServer
from noeta.telemetry.logs import json_logging

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Exit code of a process left at once on a second signal (the shell's code for SIGINT).
EXIT_INTERRUPTED = 130


def announce(text: str, *, stdout: bool = False) -> None:
    """A line for the operator of a long-running command: a log record while logs are JSON (every
    line the process writes then parses as JSON), else printed (stderr, or stdout if asked)."""
    if json_logging():
        logging.getLogger("noeta.cli").info(text)
    else:
        print(text, file=sys.stdout if stdout else sys.stderr, flush=True)


_say = announce


async def serve_until_signal(
    worker: Worker,
    until: Awaitable[Any] | None = None,
    health_port: int | None = None,
) -> bool:
    """Run ``worker`` until a signal arrives (True) or ``until`` completes (False); shut down."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            _say(f"{signal.Signals(signum).name} again: leaving now; running calls are retried elsewhere")
            sys.stdout.flush()
            os._exit(EXIT_INTERRUPTED)
        stop.set()

    for sig in _SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    health = HealthServer(health_port) if health_port is not None else None
    try:
        if health is not None:
            await health.start()
        async with worker:
            if health is not None:
                health.ready = True
            waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(stop.wait())]
            if until is not None:
                waiters.append(asyncio.ensure_future(until))
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            waiters[0].cancel()
            if health is not None:
                health.ready = False
            if stop.is_set():
                grace: timedelta = worker.config()["graceful_shutdown_timeout"]
                _say(
                    f"stopping: no new work; running tools and model calls get {grace.total_seconds():g} s to finish"
                )
        # Leaving ``async with`` is Worker.shutdown(): polling stops, running activities finish or
        # are cancelled at the end of the grace period, their results are reported.
        if stop.is_set():
            _say("stopped")
        return stop.is_set()
    finally:
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)
        if health is not None:
            await health.stop()
