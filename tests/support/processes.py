"""Worker processes for tests that stop, kill and restart them (``python worker.py ...``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

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
