"""Input at the edges that no task can carry — a lone surrogate, JSON nested without end, numbers
out of range — is refused with a typed error (4xx over HTTP) before anything starts; no secret
reaches a log line, not even an API key sent in the query string; the docs show the idempotency
key the engine really assigns."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ConfigurationError
from noeta.http import serve as serve_http
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.security.http_guard import GuardConfig
from tests.support.scripts import call, say
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "edge-test-key-0123456789abcdef"


async def test_a_goal_with_a_lone_surrogate_is_a_configuration_error_and_starts_nothing(client: AsyncClient, task_queue: str):
    provider = FakeLLMProvider(responses=[say("never")])
    with pytest.raises(ConfigurationError, match="lone surrogate"):
        await client.start("half a pair: \ud800", Options(provider=provider), task_queue=task_queue)
    assert provider.received_requests == []


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_bad_json_is_a_4xx_and_no_key_reaches_the_access_log(client: AsyncClient):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    captured = Captured()
    access = logging.getLogger("uvicorn.access")
    guard = GuardConfig(api_keys=(API_KEY,))
    running = asyncio.create_task(serve_http(client, "127.0.0.1", port, log_level="info", guard=guard))
    headers = {"authorization": f"Bearer {API_KEY}", "content-type": "application/json"}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:

            async def up() -> bool:
                try:
                    return (await http.get("/healthz")).status_code == 200
                except httpx.ConnectError:
                    assert not running.done(), running
                    return False

            await eventually(up, timeout=10)
            access.addHandler(captured)  # once uvicorn has set up its loggers
            bodies = {
                "lone surrogate": b'{"goal": "half a pair: \\ud800"}',
                "deep": b'{"goal": "x", "scope": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                "moderately deep": b'{"goal": "x", "scope": {"a": ' + b"[" * 200 + b"]" * 200 + b"}}",
                "float out of range": b'{"goal": "x", "options": {"temperature": 1e999}}',
                "integer out of range": b'{"goal": "x", "options": {"max_turns": 99999999999999999999999}}',
            }
            for name, body in bodies.items():
                response = await http.post("/tasks", content=body, headers=headers)
                assert response.status_code == 400, (name, response.text)
                assert response.json()["error"] == "JSONDecodeError", name
            # A key in the query string is refused, and never written down.
            response = await http.get("/tasks", params={"api_key": API_KEY, "limit": 1})
            assert response.status_code == 401
    finally:
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        access.removeHandler(captured)
    assert any("/tasks?" in line for line in captured.lines), captured.lines  # the line was logged
    assert not [line for line in captured.lines if API_KEY in line]


def test_the_operations_docs_show_the_idempotency_key_the_engine_assigns():
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "`{task_id}/{run_id}/{n}`" in operations
    assert "{task_id}/{call_id}`)" not in operations


KEYS: list[tuple[str, str]] = []


@tool(name="keyed", version="1", input_schema={"type": "object"}, description="Records its key.")
async def keyed(arguments: dict, ctx: ToolContext) -> ToolResult:
    KEYS.append((ctx.task_id, ctx.idempotency_key))
    return ToolResult(success=True, output="ok")


async def test_the_idempotency_key_has_the_documented_shape(client: AsyncClient, serve, task_queue: str):
    KEYS.clear()
    provider = FakeLLMProvider(responses=[call(("c1", "keyed", {})), say("done")])
    async with serve(tools=[keyed], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[keyed]), task_queue=task_queue)
        await asyncio.wait_for(client.result(task_id), 60)
    [(seen_task, key)] = KEYS
    assert seen_task == task_id
    assert re.fullmatch(re.escape(task_id) + r"/[0-9a-f-]+/1", key), key  # {task_id}/{run_id}/{n}
