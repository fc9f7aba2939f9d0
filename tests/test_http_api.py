"""The HTTP API (`noeta serve`) run for real: uvicorn on a local socket, httpx over it, a real
Temporal dev server and an in-process worker with a scripted provider behind it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ProviderError
from noeta.http import create_app
from noeta.http import serve as serve_http
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.waiting import eventually

KEEPALIVE = 0.2
PROVIDER = "FakeLLMProvider"  # the registry name of FakeLLMProvider objects


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):  # leave Ctrl-C to pytest
        yield


@pytest.fixture
async def api(client: AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client talking to the app served by uvicorn on a free local port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(client, keepalive_seconds=KEEPALIVE), log_level="warning", lifespan="off", timeout_graceful_shutdown=2
    )
    server = _Server(config)
    running = asyncio.create_task(server.serve(sockets=[sock]))
    await eventually(lambda: server.started or running.done(), timeout=10)
    assert server.started, running
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            yield http
    finally:
        server.should_exit = True
        await asyncio.wait_for(running, 10)
        sock.close()


async def sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Parse an SSE body: yields {"comment": text} or {"id", "event", "data" (parsed JSON)}."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if fields:
                message: dict[str, Any] = dict(fields)
                message["data"] = json.loads(fields["data"])
                yield message
                fields = {}
        elif line.startswith(":"):
            yield {"comment": line[1:].strip()}
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            fields[name] = fields[name] + "\n" + value if name in fields else value


async def read_sse(http: httpx.AsyncClient, path: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Every event (comments dropped) of a stream that ends by itself."""
    async with http.stream("GET", path, **kwargs) as response:
        return [m async for m in sse(response) if "comment" not in m]


async def start(http: httpx.AsyncClient, goal: str, task_queue: str, **fields: Any) -> str:
    options = {"provider": PROVIDER, **fields.pop("options", {})}
    response = await http.post("/tasks", json={"goal": goal, "task_queue": task_queue, "options": options, **fields})
    assert response.status_code == 201, response.text
    return response.json()["task_id"]


async def ended(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    """GET /tasks/{id} once the task has ended."""
    last: dict[str, Any] = {}

    async def done() -> bool:
        nonlocal last
        response = await http.get(f"/tasks/{task_id}")
        assert response.status_code == 200, response.text
        last = response.json()
        return not last["running"]

    await eventually(done)
    return last


async def test_start_then_result_and_messages(api: httpx.AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 2, "b": 3})), say("the sum is 5")])
    async with serve(tools=[add], providers=[provider]):
        task_id = await start(
            api, "add 2 and 3", task_queue, options={"allowed_tools": ["add"], "system_prompt": "Use tools.", "max_turns": 5}
        )
        task = await ended(api, task_id)
    assert (task["task_id"], task["status"], task["error"]) == (task_id, "completed", None)
    result = task["result"]
    assert (result["answer"], result["status"], result["turns"], result["usage"]["output"]) == ("the sum is 5", "completed", 2, 8)
    assert task["started"] and task["closed"]
    assert provider.received_requests[0].system == "Use tools."

    response = await api.get(f"/tasks/{task_id}/messages")
    assert response.status_code == 200
    assert response.json() == [
        {"type": "UserMessage", "text": "add 2 and 3"},
        {"type": "ToolUse", "call_id": "c1", "tool_name": "add", "arguments": {"a": 2, "b": 3}, "proposed_arguments": None},
        {"type": "ToolResultView", "call_id": "c1", "tool_name": "add", "success": True, "output": "5"},
        {"type": "AssistantMessage", "text": "the sum is 5"},
        {"type": "Result", "answer": "the sum is 5", "status": "completed"},
    ]


async def test_events_stream_a_live_task(api: httpx.AsyncClient, client: AsyncClient, serve, task_queue):
    release = threading.Event()

    @tool(name="gate", version="1", input_schema={"type": "object"})
    def gate(arguments, ctx):
        assert release.wait(30)
        return ToolResult(success=True, output="open")

    provider = FakeLLMProvider(responses=[call(("c1", "gate", {})), say("through")])
    async with serve(tools=[gate], providers=[provider]):
        task_id = await start(api, "go", task_queue, options={"allowed_tools": ["gate"]})
        events: list[dict[str, Any]] = []
        async with api.stream("GET", f"/tasks/{task_id}/events") as response:
            assert response.headers["cache-control"] == "no-cache"
            async for message in sse(response):
                if "comment" in message:
                    continue
                events.append(message)
                if message["event"] == "ToolCallStarted":
                    assert not release.is_set()  # streamed while the task is blocked in the tool
                    release.set()
    assert release.is_set()
    *envelopes, end = events
    assert envelopes[-1]["event"] == "TaskCompleted"
    assert envelopes[-1]["data"]["payload"]["answer"] == "through"
    seqs = [e["data"]["seq"] for e in envelopes]
    assert seqs == list(range(1, len(envelopes) + 1))  # gap-free, in order
    assert [int(e["id"]) for e in envelopes] == seqs
    assert all(e["event"] == e["data"]["type"] and e["data"]["task_id"] == task_id for e in envelopes)
    assert (end["event"], "id" in end, end["data"]) == ("end", False, {"task_id": task_id, "last_seq": len(envelopes), "follow": True})
    assert [e["event"] for e in envelopes] == [env.type for env in await client.events(task_id)]


async def test_last_event_id_resumes_after_it(api: httpx.AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("resumable")])
    async with serve(providers=[provider]):
        task_id = await start(api, "go", task_queue)
        await ended(api, task_id)
    path = f"/tasks/{task_id}/events"
    *everything, end = await read_sse(api, path, params={"follow": "false"})
    n = len(everything)
    assert n >= 3 and everything[-1]["event"] == "TaskCompleted"
    assert end["data"] == {"task_id": task_id, "last_seq": n, "follow": False}

    *tail, end = await read_sse(api, path, headers={"Last-Event-ID": str(n - 2)})
    assert [int(e["id"]) for e in tail] == [n - 1, n]
    assert [e["data"] for e in tail] == [e["data"] for e in everything[-2:]]
    assert end["data"]["last_seq"] == n

    # ?after_seq= resumes too; with both, the later position wins (a reconnecting EventSource
    # keeps its original URL and sends Last-Event-ID).
    assert [int(e["id"]) for e in (await read_sse(api, path, params={"after_seq": n - 1}))[:-1]] == [n]
    resumed = await read_sse(api, path, params={"after_seq": 1}, headers={"Last-Event-ID": str(n - 1)})
    assert [int(e["id"]) for e in resumed[:-1]] == [n]
    nothing = await read_sse(api, path, headers={"Last-Event-ID": str(n)})
    assert [e["event"] for e in nothing] == ["end"]


async def test_multi_turn_goals_keepalive_and_close(api: httpx.AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("first"), say("second")])
    async with serve(providers=[provider]):
        task_id = await start(api, "goal one", task_queue, keep_open=True)
        response = await api.post(f"/tasks/{task_id}/goals", json={"goal": "goal two"})
        assert response.status_code == 200, response.text
        second = response.json()
        assert (second["answer"], second["status"], second["goal_index"]) == ("second", "completed", 1)

        # The task is idle now: a following stream drains the backlog, then sends keep-alives.
        completed = 0
        async with asyncio.timeout(20), api.stream("GET", f"/tasks/{task_id}/events") as stream:
            async for message in sse(stream):
                if message.get("event") == "TaskCompleted":
                    completed += 1
                if message.get("comment") == "keep-alive" and completed == 2:
                    break  # both goals' results, then silence: leave (the server drops the stream)
        task = (await api.get(f"/tasks/{task_id}")).json()
        assert (task["running"], task["result"]) == (True, None)

        response = await api.post(f"/tasks/{task_id}/close")
        assert (response.status_code, response.json()) == (202, {"task_id": task_id})
        task = await ended(api, task_id)
        assert (task["status"], task["result"]["answer"], task["result"]["goal_index"]) == ("completed", "second", 1)

        response = await api.post(f"/tasks/{task_id}/goals", json={"goal": "goal three"})
        assert response.status_code == 409
        assert response.json()["error"] == "TaskNotOpenError"
    assert len(provider.received_requests) == 2
    texts = [(m["type"], m.get("text")) for m in (await api.get(f"/tasks/{task_id}/messages")).json()]
    assert texts == [
        ("UserMessage", "goal one"),
        ("AssistantMessage", "first"),
        ("Result", None),
        ("UserMessage", "goal two"),
        ("AssistantMessage", "second"),
        ("Result", None),
    ]


async def test_cancel_a_running_task(api: httpx.AsyncClient, serve, task_queue):
    started = asyncio.Event()

    @tool(name="wait", version="1", input_schema={"type": "object"}, heartbeat_seconds=1)
    async def wait(arguments, ctx):
        started.set()
        await asyncio.sleep(60)
        return ToolResult(success=True, output="never")

    provider = FakeLLMProvider(responses=[call(("c1", "wait", {}))])
    async with serve(tools=[wait], providers=[provider]):
        task_id = await start(api, "x", task_queue, options={"allowed_tools": ["wait"]})
        await asyncio.wait_for(started.wait(), 20)
        running = (await api.get(f"/tasks/{task_id}")).json()
        assert (running["running"], running["status"], running["result"]) == (True, "running", None)

        duplicate = await api.post("/tasks", json={"goal": "again", "task_id": task_id, "task_queue": task_queue})
        assert (duplicate.status_code, duplicate.json()["error"]) == (409, "TaskAlreadyExistsError")
        same = await api.post("/tasks", json={"goal": "x", "task_id": task_id, "task_queue": task_queue,
                                              "options": {"provider": PROVIDER, "allowed_tools": ["wait"]}})
        assert (same.status_code, same.json()) == (201, {"task_id": task_id})  # a retried start returns it

        response = await api.post(f"/tasks/{task_id}/cancel")
        assert (response.status_code, response.json()) == (202, {"task_id": task_id})
        task = await ended(api, task_id)
    assert (task["status"], task["result"]) == ("cancelled", None)
    assert task["error"]["error"] == "TaskCancelledError"
    again = await api.post(f"/tasks/{task_id}/cancel")
    assert (again.status_code, again.json()["error"]) == (409, "TaskNotOpenError")
    events = await read_sse(api, f"/tasks/{task_id}/events")
    assert events[-2]["event"] == "TaskCancelled"


async def test_a_failed_task_reports_its_typed_error(api: httpx.AsyncClient, serve, task_queue):
    def responder(request):
        raise ProviderError(provider="fake", message="bad request", status=400)

    async with serve(providers=[FakeLLMProvider(responder=responder)]):
        task_id = await start(api, "x", task_queue)
        task = await ended(api, task_id)
    assert (task["status"], task["result"]) == ("failed", None)
    assert task["error"] == {
        "error": "ProviderError",
        "message": "provider 'fake' (HTTP 400): bad request",
        "provider": "fake",
        "status": 400,
        "retryable": False,
        "retry_after": None,
        "error_type": None,
    }


async def test_a_goal_that_fails_answers_409_with_the_error(api: httpx.AsyncClient, serve, task_queue):
    def responder(request):
        if len(request.messages) == 1:
            return say("first")
        raise ProviderError(provider="fake", message="overloaded", status=400)

    async with serve(providers=[FakeLLMProvider(responder=responder)]):
        task_id = await start(api, "one", task_queue, keep_open=True)
        response = await api.post(f"/tasks/{task_id}/goals", json={"goal": "two"})
    assert response.status_code == 409
    assert response.json() == {
        "error": "ProviderError",
        "message": "provider 'fake' (HTTP 400): overloaded",
        "provider": "fake",
        "status": 400,
        "retryable": False,
        "retry_after": None,
        "error_type": None,
    }


async def test_list_tasks_filters_on_status(api: httpx.AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("listed")])
    async with serve(providers=[provider]):
        task_id = await start(api, "list me", task_queue, options={"model": "fake-model"})
        await ended(api, task_id)

    async def listed(status: str) -> list[dict[str, Any]]:
        response = await api.get("/tasks", params={"status": status, "limit": 200})
        assert response.status_code == 200, response.text
        return [t for t in response.json() if t["task_id"] == task_id]

    async def completed() -> bool:  # visibility is eventually consistent
        found = await listed("completed")
        return bool(found) and found[0]["turns"] == 1

    await eventually(completed)
    [summary] = await listed("completed")
    assert (summary["status"], summary["model"], summary["tokens_out"]) == ("completed", "fake-model", 5)
    assert isinstance(summary["started"], str)
    assert await listed("running") == []
    response = await api.get("/tasks", params={"limit": 1})
    assert response.status_code == 200 and len(response.json()) == 1


@pytest.mark.parametrize(
    ("body", "status", "error", "says"),
    [
        ({"goal": "x", "options": {"no_such_option": 1}}, 422, "ConfigurationError", "unknown field options.no_such_option"),
        ({"goal": "x", "options": {"provider": {"name": "x"}}}, 422, "ConfigurationError", "options.provider: Input should be a valid string"),
        ({"goal": "x", "options": {"allowed_tools": "add"}}, 422, "ConfigurationError", "options.allowed_tools: Input should be a valid list"),
        ({"goal": "x", "options": {"guards": ["amount", 3]}}, 422, "ConfigurationError", "options.guards.1: Input should be a valid string"),
        ({"goal": "x", "options": {"max_turns": 0}}, 422, "ConfigurationError", "max_turns must be"),
        ({"goal": "x", "options": {"tool_activity": {"heartbeat_seconds": 0}}}, 422, "ConfigurationError",
         "tool_activity.heartbeat_seconds must be a number from 1 to 86400, got 0"),
        ({"goal": "x", "options": {"guard_activity": {"timeout": 90}}}, 422, "ConfigurationError",
         "unknown field options.guard_activity.timeout"),
        ({"goal": "x", "options": {"max_turns": True}}, 422, "ConfigurationError", "options.max_turns: Input should be a valid integer"),
        ({"goal": "x", "options": {"temperature": "0.5"}}, 422, "ConfigurationError", "options.temperature"),
        ({"goal": "x", "options": {"output_schema": {"type": 7}}}, 422, "ConfigurationError", "not valid JSON Schema"),
        ({"goal": "x", "options": {"output_schema": "NoModule"}}, 422, "ConfigurationError", "module:QualName"),
        ({"goal": "x", "options": []}, 422, "ConfigurationError", "options: Input should be a valid dictionary"),
        ({"goal": "x", "options": {"mcp_servers": {"web": {"type": "http", "url": "http://127.0.0.1:9/mcp",
          "headers": {"Authorization": "Bearer abc"}}}}}, 422, "ConfigurationError", "looks like a credential"),
        ({"goal": "x", "options": {"effort": "extreme"}}, 422, "ConfigurationError", "effort must be one of"),
        ({"goal": "x", "options": {"validate_tool_input": "yes"}}, 422, "ConfigurationError", "options.validate_tool_input"),
        ({"goal": "x", "images": []}, 422, "ConfigurationError", "unknown field images"),
        ({"goal": "x", "keep_open": "yes"}, 422, "ConfigurationError", "keep_open: Input should be a valid boolean"),
        ({"goal": "x", "task_id": "a/b"}, 422, "ConfigurationError", "task_id"),
        ({"options": {}}, 422, "ConfigurationError", "goal is required"),
        ({"goal": "   "}, 422, "ConfigurationError", "goal must be a non-empty string"),
        ({"goal": "x" * (256 * 1024 + 1)}, 413, "PayloadTooLargeError", "the limit is"),
        (["goal"], 422, "ConfigurationError", "must be a JSON object"),
    ],
)
async def test_bad_start_requests_are_refused(api: httpx.AsyncClient, body, status, error, says):
    response = await api.post("/tasks", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"] == error
    assert says in response.json()["message"]


async def test_error_mapping(api: httpx.AsyncClient):
    missing = "no-such-task-http"
    for method, path in [
        ("GET", f"/tasks/{missing}"),
        ("GET", f"/tasks/{missing}/events"),
        ("GET", f"/tasks/{missing}/messages"),
        ("POST", f"/tasks/{missing}/cancel"),
        ("POST", f"/tasks/{missing}/close"),
    ]:
        response = await api.request(method, path)
        assert (response.status_code, response.json()["error"]) == (404, "TaskNotFoundError"), path
        assert missing in response.json()["message"]
    response = await api.post(f"/tasks/{missing}/goals", json={"goal": "more"})
    assert (response.status_code, response.json()["error"]) == (404, "TaskNotFoundError")

    for path in ["/tasks", f"/tasks/{missing}/goals"]:
        response = await api.post(path, content=b'{"goal": ', headers={"content-type": "application/json"})
        assert (response.status_code, response.json()["error"]) == (400, "JSONDecodeError")
    response = await api.post("/tasks", content=b'{"goal": "x", "options": {"temperature": NaN}}')
    assert response.status_code == 400

    for params in [{"limit": "many"}, {"limit": 0}, {"status": "completed' OR 1=1"}]:
        response = await api.get("/tasks", params=params)
        assert (response.status_code, response.json()["error"]) == (422, "ConfigurationError"), params
    response = await api.get(f"/tasks/{missing}/events", params={"after_seq": -1})
    assert response.status_code == 422
    response = await api.get(f"/tasks/{missing}/events", headers={"Last-Event-ID": "abc"})
    assert response.status_code == 422

    response = await api.get("/nowhere")
    assert response.status_code == 404 and response.json()["error"] == "NotFound"
    response = await api.delete("/tasks")
    assert response.status_code == 405 and response.json()["error"] == "MethodNotAllowed"


async def test_serve_runs_uvicorn_until_cancelled(client: AsyncClient):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = asyncio.create_task(serve_http(client, "127.0.0.1", port, log_level="warning"))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:

        async def up() -> bool:
            try:
                return (await http.get("/tasks", params={"limit": 1})).status_code == 200
            except httpx.ConnectError:
                assert not running.done(), running
                return False

        await eventually(up, timeout=10)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        with pytest.raises(httpx.ConnectError):
            await http.get("/tasks")


async def test_approvals_over_http(api: httpx.AsyncClient, client: AsyncClient, serve, task_queue):
    from tests.test_guards import AmountGuard, runs, wire_money

    runs.clear()
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("paid")])
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        # Guards are Python objects: start through the Python client, answer over HTTP.
        task_id = await client.start(
            "pay", Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()]), task_queue=task_queue
        )

        async def waiting() -> bool:
            return (await api.get(f"/tasks/{task_id}/approvals")).json() != []

        await eventually(waiting)
        [pending] = (await api.get(f"/tasks/{task_id}/approvals")).json()
        assert (pending["call_id"], pending["reason"], pending["guard"]) == ("c1", "wire of 2500 needs a human", "amount")
        wrong = await api.post(f"/tasks/{task_id}/approvals", json={"call_id": "c9"})
        assert (wrong.status_code, wrong.json()["error"]) == (409, "ApprovalNotPendingError")
        bad = await api.post(f"/tasks/{task_id}/approvals", json={"call_id": "c1", "approved": "yes"})
        assert bad.status_code == 422
        free_text = await api.post(f"/tasks/{task_id}/approvals", json={"call_id": "c1", "approver": "ops"})
        assert (free_text.status_code, free_text.json()["error"]) == (422, "ConfigurationError")  # not the caller's
        ok = await api.post(f"/tasks/{task_id}/approvals", json={"call_id": "c1", "approved": True})
        assert ok.status_code == 202
        assert (await client.result(task_id)).answer == "paid"
    assert runs == [{"amount": 2500}]
    [granted] = [e.payload for e in await client.events(task_id) if e.type == "ApprovalGranted"]
    assert (granted.approver, granted.via) == ("anonymous", "key")  # a server without keys: "anonymous"
    assert (await api.get(f"/tasks/{task_id}/approvals")).json() == []
    missing = await api.post("/tasks/no-such-task/approvals", json={"call_id": "c1"})
    assert missing.status_code == 404
