"""The HTTP API as the console and other operators' tools use it: the OpenAPI description and the
public console files, guards by name, the approvals inbox, injections, goals in task lists,
timezone-aware timestamps, and streamed model text over SSE. Real uvicorn, dev server, worker."""

from __future__ import annotations

import threading
from datetime import datetime

import httpx
import pytest
from starlette.routing import Route

from noeta.client.client import AsyncClient
from noeta.http import create_app
from noeta.http.console import FILES, PUBLIC_PATHS
from noeta.sdk.testing import FakeLLMProvider
from noeta.security.http_guard import GuardConfig
from noeta.worker import Registry, build_worker
from tests.support.asgi import serving
from tests.support.chat_server import FakeChatServer, Pause, chunks_for, completion, openai_for
from tests.support.inbox import inbox, wire_task
from tests.support.scripts import call, say
from tests.support.waiting import eventually
from tests.test_guards import AmountGuard, runs, wire_money
from tests.test_http_api import KEEPALIVE, ended, read_sse, sse, start

KEY = "console-key-" + "d4" * 16
AUTH = {"authorization": f"Bearer {KEY}"}


@pytest.fixture
async def api(client: AsyncClient):
    async with serving(create_app(client, keepalive_seconds=KEEPALIVE)) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
            yield http


@pytest.fixture
async def secured_app(client: AsyncClient):
    return create_app(client, keepalive_seconds=KEEPALIVE, guard=GuardConfig(api_keys=(KEY,)))


@pytest.fixture
async def secured(secured_app):
    async with serving(secured_app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        yield http


def served_routes(app) -> list[Route]:
    """The app's route table: every path and method it answers (FastAPI may keep an included
    router as one entry of the table: its routes are the router's own)."""
    found = []
    for route in app.routes:
        router = getattr(route, "original_router", None)
        if router is not None:
            found += served_routes(router)
        else:
            assert isinstance(route, Route), route  # a mount or the like would need describing too
            found.append(route)
    return found


async def test_the_openapi_document_lists_every_route_the_app_serves(secured_app, secured: httpx.AsyncClient):
    spec = (await secured.get("/openapi.json")).json()
    # path_format: the path as described, without a parameter's convertor ({task_id:task} -> {task_id})
    served = {(route.path_format, method.lower()) for route in served_routes(secured_app) for method in route.methods or ()}
    described = {(path, method) for path, operations in spec["paths"].items() for method in operations}
    assert served == described
    assert {"/openapi.json", "/docs", "/", "/console/{name}", "/tasks/{task_id}/events"} <= {p for p, _ in served}
    for route in served_routes(secured_app):  # with the status each answers when all goes well
        for method in route.methods or ():
            assert str(getattr(route, "status_code", None) or 200) in spec["paths"][route.path_format][method.lower()]["responses"]
    # Every schema an operation refers to is in the document.
    schemas = spec["components"]["schemas"]
    refs = {ref.rsplit("/", 1)[1] for ref in _refs(spec["paths"]) | _refs(schemas)}
    assert refs <= set(schemas), refs - set(schemas)
    assert "HTTPValidationError" not in schemas  # validation errors answer as every other error
    assert spec["paths"]["/tasks/{task_id}/events"]["get"]["responses"]["404"]["content"]["application/json"]


def _refs(node) -> set[str]:
    """Every ``$ref`` in a part of the document."""
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(value) for value in node))
    return set()


async def test_openapi_docs_and_console_files_are_public_the_api_is_not(secured: httpx.AsyncClient):
    spec = (await secured.get("/openapi.json")).json()
    assert spec["openapi"] == "3.1.0"
    start_body = spec["components"]["schemas"]["StartTask"]
    assert start_body["required"] == ["goal"] and start_body["additionalProperties"] is False
    options = spec["components"]["schemas"]["TaskOptions"]["properties"]
    assert {"guards", "validators", "output_schema", "allowed_tools", "provider"} <= set(options)
    assert spec["paths"]["/tasks"]["post"]["security"] == [{"bearer": []}, {"apiKey": []}]

    for path in sorted(PUBLIC_PATHS):
        response = await secured.get(path)
        assert response.status_code == 200, path
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"
    page = (await secured.get("/")).text
    assert '<script type="module" src="/console/app.js"></script>' in page and "<script>" not in page
    assert len(FILES) == len([p for p in PUBLIC_PATHS if p.startswith("/console/")])
    assert (await secured.get("/console/../app.py")).status_code in (401, 404)
    assert (await secured.get("/console/secret.txt")).status_code == 401  # not a console file: not public
    assert (await secured.get("/console/secret.txt", headers=AUTH)).status_code == 404
    assert (await secured.get("/tasks")).status_code == 401  # the data needs the key
    assert (await secured.get("/approvals")).status_code == 401
    assert (await secured.get("/approvals", headers=AUTH)).status_code == 200


async def test_guards_by_name_approvals_inbox_and_goal_in_lists(
    secured: httpx.AsyncClient, client: AsyncClient, serve, task_queue
):
    runs.clear()
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2500})), say("paid")])
    word = f"invoice{task_queue[2:]}"
    async with serve(tools=[wire_money], providers=[provider], guards=[AmountGuard()]):
        response = await secured.post("/tasks", json=wire_task(f"Pay {word} now", task_queue), headers=AUTH)
        assert response.status_code == 201, response.text
        task_id = response.json()["task_id"]
        await eventually(lambda: inbox(secured, AUTH, task_id))
        [pending] = await inbox(secured, AUTH, task_id)
        assert pending["goal"] == f"Pay {word} now"
        assert (pending["request"]["call_id"], pending["request"]["guard"]) == ("c1", "amount")
        assert pending["request"]["action"] == {"call_id": "c1", "tool_name": "wire_money", "arguments": {"amount": 2500},
                                                "risk_level": "high", "type": "tool_call"}
        task = (await secured.get(f"/tasks/{task_id}", headers=AUTH)).json()
        assert task["status"] == "awaiting_approval" and "awaiting approval" in task["current_details"]
        answer = {"call_id": "c1", "approved": True}
        assert (await secured.post(f"/tasks/{task_id}/approvals", json=answer, headers=AUTH)).status_code == 202
        assert (await client.result(task_id)).answer == "paid"
    assert runs == [{"amount": 2500}]

    async def listed() -> list:
        response = await secured.get("/tasks", params={"search": word, "status": "completed"}, headers=AUTH)
        return response.json()

    await eventually(listed)
    [summary] = await listed()
    assert (summary["task_id"], summary["goal"]) == (task_id, f"Pay {word} now")
    assert datetime.fromisoformat(summary["started"]).tzinfo is not None
    for params in [{"search": "it's"}, {"metadata": "novalue"}, {"status": "bogus"}]:
        response = await secured.get("/tasks", params=params, headers=AUTH)
        assert (response.status_code, response.json()["error"]) == (422, "ConfigurationError"), params


async def test_inject_over_http(api: httpx.AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("first"), say("second")])
    async with serve(providers=[provider]):
        task_id = await start(api, "goal one", task_queue, keep_open=True)
        await eventually(lambda: _answered(api, task_id))
        response = await api.post(f"/tasks/{task_id}/inject", json={"text": "the customer is VIP", "origin": "memory"})
        assert (response.status_code, response.json()) == (202, {"task_id": task_id})
        bad = await api.post(f"/tasks/{task_id}/inject", json={"text": "x", "origin": "human"})
        assert (bad.status_code, bad.json()["error"]) == (422, "ConfigurationError")
        assert (await api.post(f"/tasks/{task_id}/goals", json={"goal": "goal two"})).status_code == 200
        await api.post(f"/tasks/{task_id}/close")
        await ended(api, task_id)
    items = (await api.get(f"/tasks/{task_id}/messages")).json()
    assert {"type": "InjectedMessage", "text": "the customer is VIP", "origin": "memory"} in items
    assert any(m.origin == "memory" for m in provider.received_requests[1].messages)
    gone = await api.post(f"/tasks/{task_id}/inject", json={"text": "late"})
    assert (gone.status_code, gone.json()["error"]) == (409, "TaskNotOpenError")
    missing = await api.post("/tasks/no-such-task-inject/inject", json={"text": "x"})
    assert (missing.status_code, missing.json()["error"]) == (404, "TaskNotFoundError")


async def _answered(api: httpx.AsyncClient, task_id: str) -> bool:
    return (await api.get(f"/tasks/{task_id}")).json()["status"] == "idle"


async def test_event_timestamps_carry_their_timezone(api: httpx.AsyncClient, serve, task_queue):
    async with serve(providers=[FakeLLMProvider(responses=[say("on time")])]):
        task_id = await start(api, "go", task_queue)
        await ended(api, task_id)
    events = await read_sse(api, f"/tasks/{task_id}/events", params={"follow": "false"})
    stamps = [datetime.fromisoformat(e["data"]["timestamp"]) for e in events[:-1]]
    assert stamps and all(s.utcoffset() is not None and s.utcoffset().total_seconds() == 0 for s in stamps)


async def test_streamed_model_text_over_sse(client: AsyncClient, content_store, task_queue, chat: FakeChatServer):
    # No broker: the deltas reach noeta serve through the task's workflow stream (Temporal alone).
    release = threading.Event()
    pieces = chunks_for(completion({"content": "Streamed over HTTP, piece by piece."}), pieces=3)
    # The model's text waits until the HTTP listener is there.
    chat.reply([pieces[0], Pause(60, until=release), *pieces[1:]])
    registry = Registry.of(providers=[openai_for(chat, "openai-deltas")], content_store=content_store)
    app = create_app(client, keepalive_seconds=KEEPALIVE)
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        async with build_worker(client.temporal, registry, task_queue):
            task_id = await start(http, "stream it", task_queue, options={"provider": "openai-deltas"})
            deltas = []
            async with http.stream("GET", f"/tasks/{task_id}/deltas") as response:
                assert response.headers["cache-control"] == "no-cache"
                async for message in sse(response):
                    if "comment" in message:  # the stream is open, hence subscribed: let the model go on
                        release.set()
                        continue
                    if message["event"] == "end":
                        end = message
                        break
                    deltas.append(message["data"])
    assert end["data"] == {"task_id": task_id}
    assert "".join(d["text"] for d in deltas) == "Streamed over HTTP, piece by piece."
    assert len(deltas) == 3
    assert {(d["task_id"], d["call_id"], d["kind"]) for d in deltas} == {(task_id, "turn-1", "text")}
    assert (await client.result(task_id)).answer == "Streamed over HTTP, piece by piece."


async def test_a_delta_stream_resumes_after_its_last_event_id(
    client: AsyncClient, content_store, task_queue, chat: FakeChatServer
):
    """Deltas come from the task's workflow stream with OFFSET:INDEX ids: a reader that reconnects
    with the Last-Event-ID it saw gets the rest of the call, nothing twice, nothing missing; one
    that connects without it gets the call from its first piece; a malformed id is a 422."""
    release = threading.Event()
    text = "Resumed after the last event id, piece by piece, to the end."
    pieces = chunks_for(completion({"content": text}), pieces=8)
    chat.reply([*pieces[:5], Pause(60, until=release), *pieces[5:]])
    expected = [c["choices"][0]["delta"]["content"] for c in pieces if c["choices"] and c["choices"][0]["delta"].get("content")]
    registry = Registry.of(providers=[openai_for(chat, "openai-resume")], content_store=content_store)
    app = create_app(client, keepalive_seconds=KEEPALIVE)
    async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        async with build_worker(client.temporal, registry, task_queue):
            task_id = await start(http, "stream it", task_queue, options={"provider": "openai-resume"})
            first: list[dict] = []
            async with http.stream("GET", f"/tasks/{task_id}/deltas") as response:
                async for message in sse(response):
                    if "comment" not in message and message["event"] == "delta":
                        first.append(message)
                    if len(first) == 2:
                        break  # the reader goes away after two pieces
            headers = {"Last-Event-ID": first[-1]["id"]}
            release.set()
            resumed = [m for m in await read_sse(http, f"/tasks/{task_id}/deltas", headers=headers) if m["event"] == "delta"]
            from_start = [m for m in await read_sse(http, f"/tasks/{task_id}/deltas") if m["event"] == "delta"]
            bad = await http.get(f"/tasks/{task_id}/deltas", headers={"Last-Event-ID": "x;1"})
    assert [m["data"]["text"] for m in first + resumed] == expected
    assert [m["data"]["seq"] for m in first + resumed] == list(range(len(expected)))
    assert [m["data"]["text"] for m in from_start] == expected  # the task's current call, from its first piece
    assert all(":" in m["id"] for m in first + resumed)
    assert bad.status_code == 422
    assert (await client.result(task_id)).answer == text


async def test_deltas_of_an_unknown_task_are_a_404(api: httpx.AsyncClient):
    response = await api.get("/tasks/no-such-task/deltas")
    assert (response.status_code, response.json()["error"]) == (404, "TaskNotFoundError")
