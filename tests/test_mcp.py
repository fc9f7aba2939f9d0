"""Remote MCP servers (the official SDK's FastMCP, over stdio and streamable HTTP) in durable tasks.

The tool list is fetched once when the task starts and recorded; every call is an invoke_tool
activity; a server that dies mid-call is started again and the call retried; replay never
connects.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import ToolResultView
from noeta.client.options import Options
from noeta.errors import ConfigurationError, McpServerNotAllowedError
from noeta.mcp.connections import McpConnections
from noeta.protocols.mcp import mcp_tool_name
from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.mcp_server import free_port, running_http_server
from tests.support.scripts import call, say
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[1]


def stdio_server(log: Path, **env: str) -> dict:
    return {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_server"],
        "env": {"PYTHONPATH": str(ROOT), "MCP_TEST_LOG": str(log), **env},
    }


def results(request: LLMRequest) -> list[ToolResultBlock]:
    return [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


def script(*calls: tuple[str, str, dict]):
    """A stateless responder: make ``calls`` once, then answer with their outputs as JSON."""

    def respond(request: LLMRequest) -> LLMResponse:
        done = results(request)
        if not done:
            return call(*calls)
        return say(json.dumps({b.call_id: [b.success, b.output] for b in done}, sort_keys=True))

    return respond


@pytest.fixture
def mcp_log(tmp_path: Path) -> Path:
    return tmp_path / "mcp.log"


def pids(log: Path) -> list[int]:
    if not log.exists():
        return []
    return [int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("pid ")]


async def run_task(client: AsyncClient, registry: Registry, task_queue: str, options: Options, goal: str = "go", **worker):
    async with build_worker(client.temporal, registry, task_queue, **worker):
        task_id = await client.start(goal, options, task_queue=task_queue)
        return task_id, await client.result(task_id)


async def test_stdio_and_http_servers_list_and_call_through_a_task(client: AsyncClient, content_store, task_queue, mcp_log):
    provider = FakeLLMProvider(
        responder=script(
            ("c1", "mcp__local__add", {"a": 2, "b": 40}),
            ("c2", "mcp__web__echo", {"text": "over http"}),
            ("c3", "mcp__web__fail", {"reason": "no"}),
        )
    )
    registry = Registry.of(providers=[provider], content_store=content_store)
    with running_http_server() as url:
        options = Options(provider=provider, mcp_servers={"local": stdio_server(mcp_log), "web": {"type": "http", "url": url}})
        task_id, result = await run_task(client, registry, task_queue, options)
    assert json.loads(result.answer) == {
        "c1": [True, "42"],
        "c2": [True, "over http"],
        "c3": [False, "Error executing tool fail: refused: no"],  # isError: a failed result for the model
    }
    first = provider.received_requests[0]
    names = [t["name"] for t in first.tools]
    assert names == [f"mcp__local__{n}" for n in ("add", "echo", "fail", "slow_echo", "env_digest", "header_digest")] + [
        f"mcp__web__{n}" for n in ("add", "echo", "fail", "slow_echo", "env_digest", "header_digest")
    ]
    add = next(t for t in first.tools if t["name"] == "mcp__local__add")
    assert add["description"] == "Add two integers."
    assert add["input_schema"]["required"] == ["a", "b"]

    events = await client.events(task_id)
    [plan] = [e.payload for e in events if e.type == "ContextPlanComposed"]
    assert plan.tools == names  # the list is recorded in history
    completed = {e.payload.call_id: e.payload for e in events if e.type == "ToolCallCompleted"}
    assert {c: (p.tool_name, p.success) for c, p in completed.items()} == {
        "c1": ("mcp__local__add", True), "c2": ("mcp__web__echo", True), "c3": ("mcp__web__fail", False)
    }
    views = [m for m in await client.messages(task_id) if isinstance(m, ToolResultView)]
    assert [(v.tool_name, v.output) for v in views][0] == ("mcp__local__add", "42")
    # Summaries in the UI: each call is an invoke_tool activity named after the tool.
    history = await client.history(task_id)
    summaries = [
        (await client.temporal.data_converter.decode([e.user_metadata.summary]))[0]
        for e in history
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert 'mcp__local__add({"a":2,"b":40})' in summaries
    # Risk levels from the servers' annotations, for guards.
    prepared = {t.name: t.risk_level for t in (await _prepared_tools(client, task_id))}
    assert (prepared["mcp__local__add"], prepared["mcp__local__echo"], prepared["mcp__local__fail"]) == ("low", "medium", "high")


async def _prepared_tools(client: AsyncClient, task_id: str):
    """The tool specs prepare_task recorded (the result in its local-activity marker)."""
    from noeta.protocols.task import PrepareOutput

    for event in await client.history(task_id):
        details = event.marker_recorded_event_attributes.details
        if event.HasField("marker_recorded_event_attributes") and "result" in details:
            [out] = await client.temporal.data_converter.decode(details["result"].payloads, [PrepareOutput])
            return out.tools
    raise AssertionError("no prepare marker")


@pytest.mark.slow
async def test_a_killed_stdio_server_is_restarted_and_the_call_retried(client: AsyncClient, content_store, task_queue, mcp_log):
    provider = FakeLLMProvider(responder=script(("c1", "mcp__slow__slow_echo", {"text": "survivor", "seconds": 2})))
    registry = Registry.of(providers=[provider], content_store=content_store)
    options = Options(provider=provider, mcp_servers={"slow": stdio_server(mcp_log)})
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start("go", options, task_queue=task_queue)
        await eventually(lambda: mcp_log.exists() and "start survivor" in mcp_log.read_text(), timeout=60)
        [first_pid] = pids(mcp_log)
        os.kill(first_pid, signal.SIGKILL)  # the server dies in the middle of the call
        result = await client.result(task_id)
    second_pid = pids(mcp_log)[-1]
    assert second_pid != first_pid
    assert json.loads(result.answer) == {"c1": [True, f"survivor (pid {second_pid})"]}
    events = await client.events(task_id)
    retried = [e.payload for e in events if e.type == "ToolCallRetried"]
    assert [(r.tool_name, r.attempt, r.error_type) for r in retried] == [("mcp__slow__slow_echo", 1, "McpServerError")]
    [done] = [e.payload for e in events if e.type == "ToolCallCompleted"]
    assert (done.attempt, done.success) == (2, True)
    assert registry.mcp_connections is None  # closed (and the server stopped) with the worker
    await eventually(lambda: not _alive(second_pid), timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_connections_are_reused_across_calls_and_tasks_and_a_restarted_server_reconnected(
    client: AsyncClient, content_store, task_queue
):
    provider = FakeLLMProvider(responder=script(("c1", "mcp__web__add", {"a": 1, "b": 2}), ("c2", "mcp__web__echo", {"text": "x"})))
    registry = Registry.of(providers=[provider], content_store=content_store)
    connections = registry.mcp_connections = McpConnections()
    port = free_port()
    async with build_worker(client.temporal, registry, task_queue):
        with running_http_server(port) as url:
            options = Options(provider=provider, mcp_servers={"web": {"type": "http", "url": url}})
            opened = []
            for goal in ("first", "second"):
                task_id = await client.start(goal, options, task_queue=task_queue)
                assert json.loads((await client.result(task_id)).answer) == {"c1": [True, "3"], "c2": [True, "x"]}
                opened.append(connections.connects)
            # a session serves one call at a time: the two parallel calls need at most two, which
            # the second task reuses; one list per task
            assert opened[0] in (1, 2) and opened[1] == opened[0] and connections.listings == 2
        with running_http_server(port):  # the server restarted: its sessions are gone
            task_id = await client.start("third", options, task_queue=task_queue)
            assert json.loads((await client.result(task_id)).answer) == {"c1": [True, "3"], "c2": [True, "x"]}
    assert opened[0] < connections.connects <= opened[0] + 2


async def test_the_tool_list_is_recorded_so_replaying_workers_never_list_again(client: AsyncClient, content_store, task_queue):
    provider = FakeLLMProvider(
        responder=lambda r: call((f"c{len(results(r))}", "mcp__web__add", {"a": len(results(r)), "b": 1}))
        if len(results(r)) < 3
        else say("counted")
    )
    registry = Registry.of(providers=[provider], content_store=content_store)
    connections = registry.mcp_connections = McpConnections()
    with running_http_server() as url:
        options = Options(provider=provider, mcp_servers={"web": {"type": "http", "url": url}})
        # No workflow cache: every workflow task replays the history from the start.
        task_id, result = await run_task(client, registry, task_queue, options, max_cached_workflows=0)
    assert result.answer == "counted"
    assert connections.listings == 1


async def test_secrets_come_from_the_worker_environment_never_from_task_input(client: AsyncClient, content_store, task_queue, mcp_log):
    def digest(value: str) -> str:
        return hashlib.sha256(value.encode()).hexdigest()[:12]

    provider = FakeLLMProvider(
        responder=script(
            ("c1", "mcp__local__env_digest", {"name": "SERVICE_TOKEN"}),
            ("c2", "mcp__web__header_digest", {"name": "authorization"}),
        )
    )
    registry = Registry.of(providers=[provider], content_store=content_store)
    registry.mcp_connections = McpConnections(environ={"MCP_TEST_TOKEN": "t0ken-value", "MCP_WEB_TOKEN": "w3b-value"})
    with running_http_server() as url:
        options = Options(
            provider=provider,
            mcp_servers={
                "local": stdio_server(mcp_log, SERVICE_TOKEN="${MCP_TEST_TOKEN}"),
                "web": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${MCP_WEB_TOKEN}"}},
            },
        )
        task_id, result = await run_task(client, registry, task_queue, options)
    assert json.loads(result.answer) == {"c1": [True, digest("t0ken-value")], "c2": [True, digest("Bearer w3b-value")]}
    recorded = json.dumps([str(e) for e in await client.history(task_id)])
    assert "${MCP_TEST_TOKEN}" in recorded and "t0ken-value" not in recorded and "w3b-value" not in recorded

    # Literal credentials and references to other variables are refused before anything starts.
    with pytest.raises(ConfigurationError, match=r"headers\['Authorization'\] looks like a credential"):
        Options(mcp_servers={"web": {"type": "http", "url": url, "headers": {"Authorization": "Bearer abc"}}})
    with pytest.raises(ConfigurationError, match=r"\$\{HOME\} cannot be referenced"):
        Options(mcp_servers={"local": {"type": "stdio", "command": "x", "args": ["${HOME}"]}})
    with pytest.raises(ConfigurationError, match="type must be 'stdio' or 'http'"):
        Options(mcp_servers={"x": {"type": "sse", "url": url}})
    with pytest.raises(ConfigurationError, match="alias"):
        Options(mcp_servers={"a__b": {"type": "http", "url": url}})


async def test_a_worker_starts_only_the_commands_it_allows(client: AsyncClient, content_store, task_queue, mcp_log):
    provider = FakeLLMProvider(responses=[say("never")])
    registry = Registry.of(providers=[provider], content_store=content_store)
    registry.mcp_commands = ["npx"]  # as NOETA_MCP_COMMANDS=npx would
    options = Options(provider=provider, mcp_servers={"local": stdio_server(mcp_log)})
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start("go", options, task_queue=task_queue)
        with pytest.raises(McpServerNotAllowedError, match="NOETA_MCP_COMMANDS"):
            await client.result(task_id)
    assert provider.received_requests == [] and not mcp_log.exists()  # nothing started, no token spent


def test_tool_names_fit_every_provider():
    assert mcp_tool_name("fs", "read_file") == "mcp__fs__read_file"
    assert mcp_tool_name("gh", "repos.list/all") == "mcp__gh__repos_list_all"
    long = mcp_tool_name("server", "x" * 100)
    assert len(long) == 64 and long.startswith("mcp__server__xxx")
    assert long != mcp_tool_name("server", "x" * 99)


async def test_replay_of_a_recorded_mcp_history_connects_to_nothing():
    """The recorded history names an HTTP server that no longer exists; replay needs none."""
    from temporalio.client import WorkflowHistory

    from tests.support.replay import replay

    path = ROOT / "tests" / "histories" / "lean-steps" / "mcp_tools.json"
    history = WorkflowHistory.from_json("history-mcp_tools", path.read_text())
    recorded = json.loads(path.read_text())
    started = recorded["events"][0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"]
    url = json.loads(base64.b64decode(started))["mcp_servers"]["web"]["url"]
    host, port = url.split("//")[1].split("/")[0].split(":")
    reader = None
    try:
        reader = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 2)
    except OSError:
        pass
    assert reader is None, "nothing may listen where the recorded server was"
    assert await replay(history) is None
