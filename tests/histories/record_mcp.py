"""Record the histories of tasks whose remote MCP server asks back during a tool call, for the
replay tests:

    python -m tests.histories.record_mcp [SCENARIO ...]

Writes tests/histories/mcp-elicitation/{accepted,declined}.json (a person's answer to the server's
question, given after the call stopped: accept with content, decline),
tests/histories/mcp-elicitation-held/{held,waited}.json (the worker held the server's request
open: answered in time on that request; or not in time, so the call stopped, the task waited and
made it again), tests/histories/mcp-sampling/sampled.json (the task's model answers the server's
sampling request) and tests/histories/mcp-login-wait/login.json (a user's login lacked a scope:
the task waited for the operator's new login, then made the call again). As for record.py: only
to ADD histories, never to re-record one that fails to replay; name the scenarios to record
(default: all).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.context.content_store import LocalContentStore
from noeta.mcp.config import parse_server
from noeta.mcp.connections import McpConnections
from noeta.mcp.login import login
from noeta.mcp.tokens import McpTokenStore
from noeta.protocols.login_wait import LoginRequest
from noeta.protocols.names import PATCH_MCP_ELICITATION, PATCH_MCP_ELICITATION_HELD, PATCH_MCP_LOGIN_WAIT, PATCH_MCP_SAMPLING
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.histories.record import run_histories
from tests.histories.recording import recording_client
from tests.support.mcp_asking_registry import registry as asking_registry
from tests.support.mcp_sampling_registry import registry as sampling_registry
from tests.support.mcp_server import running_http_server
from tests.support.oauth_server import running_protected_server
from tests.support.waiting import eventually
from tests.test_mcp_elicitation import options, waiting_question
from tests.test_mcp_step_up import headless_browser, publish_once

HERE = Path(__file__).parent


def answered(approved: bool, hold: float | None = None, **answer: Any) -> Callable[[AsyncClient, str], Awaitable[str]]:
    """A task whose server's question a person answers as soon as it is listed (``hold``: the
    task's grace period, None: the default)."""

    async def run(client: AsyncClient, url: str) -> str:
        task_id = await client.start("go", options(url) if hold is None else options(url, elicitation_hold_seconds=hold))
        question = await waiting_question(client, task_id)
        await client.approve(task_id, question.call_id, approved, approver="user:ada", **answer)
        await client.result(task_id)
        return task_id

    return run


async def waited(client: AsyncClient, url: str) -> str:
    task_id = await client.start("go", options(url, elicitation_hold_seconds=1))
    question = await waiting_question(client, task_id)

    async def stopped() -> bool:
        history = await client.temporal.get_workflow_handle(task_id).fetch_history()
        return '"McpInputRequiredError"' in history.to_json()

    await eventually(stopped, timeout=30)
    await client.approve(task_id, question.call_id, True, approver="user:ada", arguments={"confirm": True, "note": "late"})
    await client.result(task_id)
    return task_id


async def sampled(client: AsyncClient, url: str) -> str:
    task_id = await client.start("go", Options(provider="sampling", mcp_servers={"sampler": {"type": "http", "url": url, "sampling": True}}))
    await client.result(task_id)
    return task_id


async def login_wait(client: AsyncClient, store: LocalContentStore, tmp: Path) -> str:
    """A user's login lacks the scope ``publish`` needs: the task waits for the operator's new
    login (a ``login`` action), who logs in with the scope it names and approves."""
    tokens = McpTokenStore(tmp / "tokens")
    with running_protected_server(step_up={"publish": "write"}) as protected:
        server = {"type": "http", "url": protected.url, "auth": {"grant": "authorization_code"}}
        await login("crm", parse_server("crm", server), tokens, headless_browser)
        provider = FakeLLMProvider(responder=publish_once)
        registry = Registry.of(providers=[provider], content_store=store)
        registry.mcp_connections = McpConnections(tokens=tokens)
        async with build_worker(client.temporal, registry, client.task_queue):
            task_id = await client.start("publish", Options(provider=provider, mcp_servers={"crm": server}, tool_retries=0))
            waiting: list[LoginRequest] = []

            async def asked() -> bool:
                waiting[:] = [r.action for r in await client.pending_approvals(task_id) if isinstance(r.action, LoginRequest)]
                return bool(waiting)

            await eventually(asked, timeout=30)
            again = {**server, "auth": {"grant": "authorization_code", "scope": waiting[0].scope}}
            await login("crm", parse_server("crm", again), tokens, headless_browser)
            await client.approve(task_id, waiting[0].call_id, True, approver="user:operator")
            await client.result(task_id)
    return task_id


def asking(registry: Registry, scenario: Callable[[AsyncClient, str], Awaitable[str]]) -> Recorder:
    """A scenario against the test MCP server over HTTP, on a worker of ``registry``."""

    async def run(client: AsyncClient, store: LocalContentStore, tmp: Path) -> str:
        registry.content_store = store
        with running_http_server(asking=True) as url:
            async with build_worker(client.temporal, registry, client.task_queue):
                return await scenario(client, url)

    return run


Recorder = Callable[[AsyncClient, LocalContentStore, Path], Awaitable[str]]
SCENARIOS: dict[str, tuple[str, Recorder]] = {
    # After the call stopped at the question (no grace period).
    "accepted": (PATCH_MCP_ELICITATION, asking(asking_registry, answered(True, 0, arguments={"confirm": True}))),
    "declined": (PATCH_MCP_ELICITATION, asking(asking_registry, answered(False, 0, reason="not now"))),
    # While the worker held the server's request open.
    "held": (PATCH_MCP_ELICITATION_HELD, asking(asking_registry, answered(True, arguments={"confirm": True}))),
    "waited": (PATCH_MCP_ELICITATION_HELD, asking(asking_registry, waited)),
    "sampled": (PATCH_MCP_SAMPLING, asking(sampling_registry, sampled)),
    "login": (PATCH_MCP_LOGIN_WAIT, login_wait),
}


async def main(names: list[str]) -> None:
    # The test MCP servers listen on loopback, which a worker refuses unless it is listed.
    os.environ.setdefault("NOETA_MCP_URLS", "http://127.0.0.1:*")
    async with recording_client() as (server, client, store):
        for name in names:
            folder, scenario = SCENARIOS[name]
            with tempfile.TemporaryDirectory() as tmp:
                task_id = await scenario(client, store, Path(tmp))
            (history,) = await run_histories(client, task_id)
            (HERE / folder).mkdir(exist_ok=True)
            (HERE / folder / f"{name}.json").write_text(history.to_json())
            print(f"recorded {folder}/{name}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or list(SCENARIOS)))
