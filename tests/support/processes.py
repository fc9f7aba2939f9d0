"""Worker processes for tests that stop, kill and restart them (``python worker.py ...``)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from tests.support.waiting import eventually

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]


def worker_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def start_worker(env: dict[str, str], queue: str, registry: str, *args: str) -> subprocess.Popen[str]:
    """A worker subprocess, returned once it announced itself (it polls from then on)."""
    proc = subprocess.Popen(
        [sys.executable, "worker.py", "--registry", registry, "--task-queue", queue, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("noeta worker on"), line + proc.stdout.read()
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Replaced(Generic[T]):
    """What :func:`killed_and_replaced` did: the task, what finishing it returned, and the process
    ids of the worker killed and of the one that took over."""

    task_id: str
    result: T
    killed_pid: int
    second_pid: int


async def killed_and_replaced(
    env: dict[str, str],
    queue: str,
    registry: str,
    start: Callable[[], Awaitable[str]],
    killed_when: Callable[[], bool],
    finish: Callable[[str], Awaitable[T]],
    *,
    first_env: dict[str, str] | None = None,
    kill_timeout: float = 30.0,
    finish_timeout: float = 60.0,
) -> Replaced[T]:
    """A task started (``start()``, returning its id) on a worker subprocess that is SIGKILLed once
    ``killed_when()`` holds, then finished (``finish(task_id)``) on a second worker.
    ``first_env``: the first worker's environment, if not ``env``."""
    first = await asyncio.to_thread(start_worker, first_env or env, queue, registry)
    try:
        task_id = await start()
        await eventually(killed_when, timeout=kill_timeout)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    second = await asyncio.to_thread(start_worker, env, queue, registry)
    try:
        result = await asyncio.wait_for(finish(task_id), finish_timeout)
        return Replaced(task_id, result, first.pid, second.pid)
    finally:
        second.terminate()
        second.wait(10)
