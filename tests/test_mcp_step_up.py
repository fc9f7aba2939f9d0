"""Scope step-up (the MCP authorization spec: ``403 insufficient_scope`` with a scope challenge)
against a real authorization server and an MCP server whose ``publish`` tool needs one more scope
(tests/support/oauth_server.py): a machine identity steps up by itself; a user's login makes the
task wait, listed like an approval with the command that logs in again, and the call goes on once
the operator has logged in and said so."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.http import create_app
from noeta.mcp.config import parse_server
from noeta.mcp.connections import McpConnections
from noeta.mcp.login import login
from noeta.mcp.tokens import McpTokenStore
from noeta.protocols.login_wait import LoginRequest
from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.keys import parse_keys
from noeta.worker import Registry, build_worker
from tests.support.oauth_server import ProtectedServer, running_protected_server
from tests.support.scripts import call, say
from tests.support.waiting import eventually
from tests.test_mcp_elicitation import cli_output

KEYS = parse_keys([f"k1:{base64.b64encode(b'k' * 32).decode()}"])


@pytest.fixture
def protected():
    with running_protected_server(step_up={"publish": "write"}) as server:
        server.state.add_client("machine-1", "machine-secret-value")
        yield server


@pytest.fixture
def store(tmp_path: Path) -> McpTokenStore:
    return McpTokenStore(tmp_path / "tokens", KEYS)


def publish_once(request: LLMRequest) -> LLMResponse:
    done = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    if not done:
        return call(("c1", "mcp__crm__publish", {"text": "the report"}))
    return say(json.dumps({b.call_id: [b.success, b.output] for b in done}))


async def run_worker(client: AsyncClient, content_store, task_queue: str, store: McpTokenStore, environ=None):
    provider = FakeLLMProvider(responder=publish_once)
    registry = Registry.of(providers=[provider], content_store=content_store)
    registry.mcp_connections = McpConnections(environ=environ, tokens=store)
    return provider, build_worker(client.temporal, registry, task_queue)


async def test_a_machine_identity_steps_up_by_itself(
    client: AsyncClient, content_store, task_queue, protected: ProtectedServer, store: McpTokenStore, monkeypatch
):
    monkeypatch.setenv("MCP_CRM_SECRET", "machine-secret-value")
    server = {"type": "http", "url": protected.url, "auth": {"client_id": "machine-1", "client_secret": "${MCP_CRM_SECRET}"}}
    provider, worker = await run_worker(client, content_store, task_queue, store, {"MCP_CRM_SECRET": "machine-secret-value"})
    async with worker:
        task_id = await client.start("publish", Options(provider=provider, mcp_servers={"crm": server}, tool_retries=0), task_queue=task_queue)
        result = await client.result(task_id)
    assert json.loads(result.answer) == {"c1": [True, "published: the report"]}
    # Refused once for want of 'write', a new client_credentials token asked for it, the call sent again.
    assert protected.step_up is not None and protected.step_up.refused == ["publish"]
    assert protected.state.grants == ["client_credentials", "client_credentials"]
    newest = protected.state.access[protected.state.issued[-1]]
    assert "write" in newest["scopes"]
    assert not [e for e in await client.events(task_id) if e.type in ("ToolCallFailed", "ApprovalRequested")]


async def headless_browser(url: str) -> None:
    async with httpx.AsyncClient(follow_redirects=True, timeout=60) as http:
        (await http.get(url)).raise_for_status()


async def test_a_users_login_waits_for_the_operator_and_goes_on(
    client: AsyncClient, content_store, task_queue, protected: ProtectedServer, store: McpTokenStore, capsys,
    settings, data_dir: Path, monkeypatch,
):
    server = {"type": "http", "url": protected.url, "auth": {"grant": "authorization_code"}}
    await login("crm", parse_server("crm", server), store, headless_browser)
    provider, worker = await run_worker(client, content_store, task_queue, store)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(client)), base_url="http://127.0.0.1", timeout=60)
    try:
        async with worker:
            task_id = await client.start("publish", Options(provider=provider, mcp_servers={"crm": server}, tool_retries=0), task_queue=task_queue)
            waiting: list[LoginRequest] = []

            async def asked() -> bool:
                waiting[:] = [r.action for r in await client.pending_approvals(task_id) if isinstance(r.action, LoginRequest)]
                return bool(waiting)

            await eventually(asked, timeout=30)
            wait = waiting[0]
            assert (wait.call_id, wait.server, wait.tool_name, wait.url) == ("login:c1:1", "crm", "mcp__crm__publish", protected.url)
            assert "write" in wait.scope.split()
            assert wait.command == f"noeta mcp login crm --url {protected.url} --scope '{wait.scope}'"
            assert (await client.describe(task_id)).status == "awaiting_approval"
            listed = (await http.get(f"/tasks/{task_id}/approvals")).json()
            assert [(r["call_id"], r["action"]["type"], r["action"]["command"]) for r in listed] == [
                ("login:c1:1", "login", wait.command)
            ]
            monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
            monkeypatch.setenv("NOETA_HOME", str(data_dir))
            code, out, _ = await asyncio.to_thread(cli_output, capsys, "approvals", task_id)
            assert code == 0 and "login:c1:1" in out and wait.command in out, out
            # The operator runs the command the wait names, then says the task may go on.
            await login("crm", parse_server("crm", {**server, "auth": {"grant": "authorization_code", "scope": wait.scope}}), store, headless_browser)
            await client.approve(task_id, wait.call_id, True, approver="user:operator")
            result = await client.result(task_id)
    finally:
        await http.aclose()
    assert json.loads(result.answer) == {"c1": [True, "published: the report"]}
    assert protected.step_up is not None and protected.step_up.refused == ["publish"]
    events = [e for e in await client.events(task_id) if e.type in ("ApprovalRequested", "ApprovalGranted", "ToolCallFailed")]
    assert [(e.type, e.payload.call_id) for e in events] == [("ApprovalRequested", "login:c1:1"), ("ApprovalGranted", "login:c1:1")]
    assert wait.command in (events[0].payload.reason or "")
