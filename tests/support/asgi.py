"""Serve an ASGI app with uvicorn on a free 127.0.0.1 port for one test."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from tests.support.waiting import eventually


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):  # leave Ctrl-C to pytest
        yield


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``async with serving(app) as base_url:`` — uvicorn runs ``app`` until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2))
    running = asyncio.create_task(server.serve(sockets=[sock]))
    await eventually(lambda: server.started or running.done(), timeout=10)
    assert server.started, running
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(running, 10)
        sock.close()
