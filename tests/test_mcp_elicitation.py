"""An MCP server that asks the user back (``elicitation/create``) during a tool call: the task waits
durably like an approval (listed over HTTP and in the CLI), survives its worker being killed, and the
call completes with the person's answer, whose name the events record."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import pytest

from noeta.cli import run
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.http import create_app
from noeta.protocols.elicitation import ElicitationRequest
from noeta.worker import build_worker
from tests.support.mcp_asking_registry import registry as asking_registry
from tests.support.mcp_server import running_http_server
from tests.support.processes import start_worker, worker_env
from tests.support.waiting import eventually

REGISTRY = "tests.support.mcp_asking_registry:registry"


def options(url: str, **more) -> Options:
    return Options(provider="asking", mcp_servers={"asker": {"type": "http", "url": url}}, **more)


async def waiting_question(client: AsyncClient, task_id: str) -> ElicitationRequest:
    found: list[ElicitationRequest] = []

    async def asked() -> bool:
        found[:] = [r.action for r in await client.pending_approvals(task_id) if isinstance(r.action, ElicitationRequest)]
        return bool(found)

    await eventually(asked, timeout=30)
    return found[0]


def server_log(log: Path) -> tuple[list[str], list[str]]:
    """The test server's request ids of each question asked and each answer it got."""
    lines = log.read_text().splitlines() if log.exists() else []
    return ([line.split(" request ")[-1] for line in lines if line.startswith("asked")],
            [line.split(" request ")[-1] for line in lines if line.startswith("answered")])


async def tool_calls_scheduled(client: AsyncClient, task_id: str) -> int:
    history = await client.temporal.get_workflow_handle(task_id).fetch_history()
    return history.to_json().count('"name": "noeta.invoke_tool"')


async def test_a_prompt_answer_reaches_the_server_on_the_request_that_asked(
    client: AsyncClient, content_store, task_queue, tmp_path: Path, monkeypatch
):
    log = tmp_path / "mcp.log"
    monkeypatch.setenv("MCP_TEST_LOG", str(log))  # the HTTP server runs in this process
    asking_registry.content_store = content_store
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(client)), base_url="http://127.0.0.1", timeout=60)
    with running_http_server(asking=True) as url:
        async with build_worker(client.temporal, asking_registry, task_queue):
            task_id = await client.start("go", options(url), task_queue=task_queue)
            question = await waiting_question(client, task_id)  # listed while the server's request is open
            assert server_log(log) == ([server_log(log)[0][0]], [])
            answered = await http.post(f"/tasks/{task_id}/elicitations", json={"call_id": question.call_id, "action": "accept", "content": {"confirm": True}})
            assert answered.status_code == 202, answered.text
            result = await asyncio.wait_for(client.result(task_id), 60)
            assert await client.pending_approvals(task_id) == []
    await http.aclose()
    assert result.answer == "tool said: delete the report: confirm=True note=none"
    asked, answers = server_log(log)
    assert len(asked) == 1 and answers == asked  # one tool call, answered on the request that asked
    assert await tool_calls_scheduled(client, task_id) == 1
    events = [e for e in await client.events(task_id) if e.type in ("ElicitationRequested", "ApprovalGranted", "ToolCallCompleted")]
    assert [e.type for e in events] == ["ElicitationRequested", "ApprovalGranted", "ToolCallCompleted"]
    assert (events[1].payload.call_id, events[1].payload.arguments) == ("elicit:c1:1", {"confirm": True})


async def test_past_the_grace_period_the_call_stops_and_is_made_again_with_the_answer(
    client: AsyncClient, content_store, task_queue, tmp_path: Path, monkeypatch
):
    log = tmp_path / "mcp.log"
    monkeypatch.setenv("MCP_TEST_LOG", str(log))
    asking_registry.content_store = content_store
    with running_http_server(asking=True) as url:
        async with build_worker(client.temporal, asking_registry, task_queue):
            task_id = await client.start("go", options(url, elicitation_hold_seconds=1), task_queue=task_queue)
            question = await waiting_question(client, task_id)

            async def stopped() -> bool:  # the held request given up: the call's activity failed
                history = await client.temporal.get_workflow_handle(task_id).fetch_history()
                return '"McpInputRequiredError"' in history.to_json()

            await eventually(stopped, timeout=30)
            assert [r.call_id for r in await client.pending_approvals(task_id)] == [question.call_id]  # still waiting
            await client.approve(task_id, question.call_id, True, approver="user:ada", arguments={"confirm": True, "note": "late"})
            result = await asyncio.wait_for(client.result(task_id), 60)
    assert result.answer == "tool said: delete the report: confirm=True note=late"
    asked, answers = server_log(log)
    assert len(asked) == 2 and answers == [asked[1]]  # made again once; the first request never answered
    assert await tool_calls_scheduled(client, task_id) == 2
    events = [e.type for e in await client.events(task_id) if e.type in ("ElicitationRequested", "ApprovalGranted", "ToolCallCompleted")]
    assert events == ["ElicitationRequested", "ApprovalGranted", "ToolCallCompleted"]


async def test_a_question_waits_for_a_person_and_the_call_completes_with_the_answer(client: AsyncClient, content_store, task_queue):
    asking_registry.content_store = content_store
    with running_http_server(asking=True) as url:
        async with build_worker(client.temporal, asking_registry, task_queue):
            task_id = await client.start("go", options(url), task_queue=task_queue)
            question = await waiting_question(client, task_id)
            assert (question.server, question.message, question.tool_call_id) == ("asker", "Really delete the report?", "c1")
            assert set(question.requested_schema["properties"]) == {"confirm", "note"}
            await client.approve(task_id, question.call_id, True, approver="user:ada", arguments={"confirm": True})
            result = await client.result(task_id)
    assert result.answer == "tool said: delete the report: confirm=True note=none"


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.parametrize("hold", [0, None], ids=["stopped", "held"])
async def test_the_wait_survives_a_killed_worker_and_is_answered_over_http(
    client: AsyncClient, settings, data_dir: Path, task_queue: str, tmp_path: Path, monkeypatch, capsys, hold: float | None
):
    """``stopped``: no grace period, the call stops at the question and the wait is the workflow's
    alone, the call is made again with the answer. ``held``: the worker dies while it holds the
    server's request; the call's next attempt asks again and gets the answer on its own request."""
    log = tmp_path / "mcp.log"
    monkeypatch.setenv("MCP_TEST_LOG", str(log))  # the HTTP server runs in this process
    env = worker_env(TEMPORAL_ADDRESS=settings.temporal_address, NOETA_HOME=str(data_dir))
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(client)), base_url="http://127.0.0.1", timeout=60)
    with running_http_server(asking=True) as url:
        first = await asyncio.to_thread(start_worker, env, task_queue, REGISTRY)
        second = None
        try:
            more = {} if hold is None else {"elicitation_hold_seconds": hold}
            task_id = await client.start("go", options(url, **more), task_queue=task_queue)
            question = await waiting_question(client, task_id)
            listed = (await http.get(f"/tasks/{task_id}/approvals")).json()
            assert [(r["call_id"], r["action"]["type"], r["action"]["message"]) for r in listed] == [
                ("elicit:c1:1", "elicitation", "Really delete the report?")
            ]
            assert listed[0]["action"]["requested_schema"]["required"] == ["confirm"]
            monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
            monkeypatch.setenv("NOETA_HOME", str(data_dir))
            code, out, _ = await asyncio.to_thread(cli_output, capsys, "approvals", task_id)
            assert code == 0 and "elicit:c1:1" in out and "asks “Really delete the report?”" in out, out

            first.send_signal(signal.SIGKILL)  # nothing is lost: the wait is the workflow's
            first.wait(10)
            second = await asyncio.to_thread(start_worker, env, task_queue, REGISTRY)
            bad = await http.post(f"/tasks/{task_id}/elicitations", json={"call_id": question.call_id, "action": "accept", "content": {"confirm": "yes"}})
            assert bad.status_code == 422 and "confirm: expected boolean" in bad.json()["message"], bad.text
            answered = await http.post(f"/tasks/{task_id}/elicitations", json={"call_id": question.call_id, "action": "accept", "content": {"confirm": True, "note": "ok"}})
            assert answered.status_code == 202, answered.text
            result = await asyncio.wait_for(client.result(task_id), 60)
        finally:
            for proc in (first, second):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(15)
            await http.aclose()
    assert result.answer == "tool said: delete the report: confirm=True note=ok"
    asked, answers = server_log(log)
    assert len(asked) == 2 and answers == [asked[1]]  # the first request never got an answer (docs/mcp.md)
    # Made again by the workflow with the answer, or by Temporal's retry of the held call's activity.
    assert await tool_calls_scheduled(client, task_id) == (2 if hold == 0 else 1)
    events = [e for e in await client.events(task_id) if e.type in ("ElicitationRequested", "ApprovalGranted", "ToolCallCompleted")]
    assert [e.type for e in events] == ["ElicitationRequested", "ApprovalGranted", "ToolCallCompleted"]
    assert (events[0].payload.server, events[0].payload.message) == ("asker", "Really delete the report?")
    granted = events[1].payload
    assert (granted.call_id, granted.via, granted.arguments) == ("elicit:c1:1", "key", {"confirm": True, "note": "ok"})
    assert granted.approver


def cli_output(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err
