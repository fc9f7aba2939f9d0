"""One trace per task, as an operator's backend receives it: the process exports over OTLP/HTTP to
a real receiver of the test's own, which decodes the protobuf requests.

A task started over HTTP with a ``traceparent`` (and no tracing set up in the HTTP client) lands in
the caller's trace: the run's ``invoke_agent`` span is the caller span's child, and every model and
tool span is the ``invoke_agent`` span's child. A task started by a program inside its own span
carries that trace to its sub-agent, whose spans are in the same trace under its own
``invoke_agent`` span."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from opentelemetry import trace

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.options import HostConfig, Options
from noeta.context.content_store import LocalContentStore
from noeta.http import create_app
from noeta.sdk import SubAgent
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.asgi import serving
from tests.support.chat_server import FakeChatServer, completion, openai_for
from tests.support.otlp_receiver import OTLPReceiver, ReceivedSpan
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.waiting import eventually

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def by_name(spans: list[ReceivedSpan], prefix: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver.running() as running:
        yield running


@pytest.fixture
async def traced(receiver: OTLPReceiver, settings: Settings, content_store: LocalContentStore) -> AsyncClient:
    """A client connected while tracing is on (as a program that set OTEL_* up would be): its
    workers make the tasks' invoke_agent spans."""
    return await AsyncClient.connect(HostConfig(settings=settings, content_store=content_store))


@contextlib.asynccontextmanager
async def worker(client: AsyncClient, store: LocalContentStore, queue: str, tools=(), providers=()) -> AsyncIterator[None]:
    registry = Registry.of(tools=tools, providers=providers, content_store=store)
    async with build_worker(client.temporal, registry, queue, workflow_failure_exception_types=[Exception]):
        yield


async def test_a_task_started_over_http_is_one_trace_under_the_callers_span(
    client: AsyncClient, traced: AsyncClient, receiver: OTLPReceiver, content_store: LocalContentStore, task_queue: str,
    chat: FakeChatServer,
):
    # noeta serve's client connected before any tracing was set up: the worker's client traces.
    tool_call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": 2, "b": 3})}}
    chat.reply(completion({"content": None, "tool_calls": [tool_call]}, "tool_calls"))
    chat.reply(completion({"content": "5"}))
    providers = {"default": openai_for(chat, name="default")}
    async with worker(traced, content_store, task_queue, [add], providers), serving(create_app(client)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            started = await http.post(
                "/tasks",
                json={"goal": "add 2 and 3", "task_queue": task_queue, "options": {"provider": "default", "allowed_tools": ["add"]}},
                headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
            )
            assert started.status_code == 201, started.text
            task_id = started.json()["task_id"]
            assert (await client.result(task_id)).answer == "5"
    await eventually(lambda: by_name(receiver.in_trace(CALLER_TRACE), "invoke_agent"))
    spans = receiver.in_trace(CALLER_TRACE)

    [agent] = by_name(spans, "invoke_agent")
    chats, tools = by_name(spans, "chat "), by_name(spans, "execute_tool ")
    assert (len(chats), [t.name for t in tools]) == (2, ["execute_tool add"])
    assert agent.parent_id == CALLER_SPAN  # the caller's span, from the HTTP request's traceparent
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.conversation.id"] == task_id
    assert (agent.attributes["gen_ai.provider.name"], agent.attributes["noeta.provider"]) == ("openai", "default")
    assert {s.parent_id for s in [*chats, *tools]} == {agent.span_id}
    # Every span the task made is in this trace, and nothing else of it went elsewhere.
    of_task = [s for s in receiver.spans if s.attributes.get("gen_ai.conversation.id") == task_id]
    assert sorted(s.span_id for s in of_task) == sorted(s.span_id for s in [agent, *chats, *tools])
    # The provider's own name, not the name it is registered under.
    assert {c.attributes["gen_ai.provider.name"] for c in chats} == {"openai"}
    assert {c.attributes["noeta.provider"] for c in chats} == {"default"}
    assert "gen_ai.input.messages" not in chats[0].attributes  # message content is opt-in


def child_of(request) -> bool:
    return "/sub/" in request.metadata["task_id"]


async def test_a_sub_agents_spans_are_in_its_parents_trace(
    traced: AsyncClient, receiver: OTLPReceiver, content_store: LocalContentStore, task_queue: str
):
    client = traced
    def respond(request):
        if child_of(request):
            return say("found it")
        if len(request.messages) == 1:
            return call(("r1", "helper", {"goal": "look it up"}))
        return say("done")

    provider = FakeLLMProvider(responder=respond)
    tracer = trace.get_tracer("tests")
    async with worker(client, content_store, task_queue, providers=[provider]):
        with tracer.start_as_current_span("request") as caller:  # a program with tracing of its own
            options = Options(provider=provider, subagents=[SubAgent("helper", "Helps.")])
            task_id = await client.start("find it", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    trace_id = f"{caller.get_span_context().trace_id:032x}"
    await eventually(lambda: len(by_name(receiver.in_trace(trace_id), "invoke_agent")) == 2)
    spans = receiver.in_trace(trace_id)

    parent = next(s for s in by_name(spans, "invoke_agent") if s.attributes["gen_ai.agent.id"] == task_id)
    [child] = [s for s in by_name(spans, "invoke_agent") if s is not parent]
    assert parent.parent_id == f"{caller.get_span_context().span_id:016x}"
    assert (child.name, child.parent_id) == ("invoke_agent helper", parent.span_id)
    assert child.attributes["noeta.parent_task_id"] == task_id
    chats = by_name(spans, "chat ")
    assert sorted(c.parent_id for c in chats) == sorted([parent.span_id, parent.span_id, child.span_id])
    [child_chat] = [c for c in chats if c.parent_id == child.span_id]
    assert child.attributes["gen_ai.usage.output_tokens"] == child_chat.attributes["gen_ai.usage.output_tokens"] > 0


@pytest.mark.parametrize("value", ["00-" + "0" * 32 + "-00f067aa0ba902b7-01", "junk", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"])
def test_a_malformed_traceparent_is_ignored(value: str):
    from noeta.protocols.trace_context import parse_traceparent
    from noeta.telemetry.trace_headers import caller_traceparent, current_traceparent

    assert parse_traceparent(value) is None
    with caller_traceparent(value):
        assert current_traceparent() is None


STEPS = 12


def counting(request):
    done = sum(1 for m in request.messages for b in m.content if getattr(b, "type", "") == "tool_result")
    return call((f"c{done}", "add", {"a": done, "b": 1})) if done < STEPS else say(f"counted to {done}")


async def test_the_runs_of_a_task_that_continued_as_new_are_one_trace(
    traced: AsyncClient, receiver: OTLPReceiver, content_store: LocalContentStore, task_queue: str
):
    client = traced
    from tests.support.tools import add

    provider = FakeLLMProvider(responder=counting)
    tracer = trace.get_tracer("tests")
    async with worker(client, content_store, task_queue, [add], [provider]):
        with tracer.start_as_current_span("request") as caller:
            options = Options(provider=provider, allowed_tools=[add], max_history_events=40)
            task_id = await client.start("count", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == f"counted to {STEPS}"
    runs = sum(1 for e in await client.events(task_id) if e.type == "TaskContinuedAsNew") + 1
    assert runs >= 2
    trace_id = f"{caller.get_span_context().trace_id:032x}"
    await eventually(lambda: len(by_name(receiver.in_trace(trace_id), "invoke_agent")) == runs)
    spans = receiver.in_trace(trace_id)

    agents = by_name(spans, "invoke_agent")
    # Each run is an invoke_agent span under the caller's span; every call is under its run's span.
    assert {a.parent_id for a in agents} == {f"{caller.get_span_context().span_id:016x}"}
    assert len({a.attributes["noeta.run_id"] for a in agents}) == runs
    assert sum(1 for a in agents if a.attributes.get("noeta.continued_as_new")) == runs - 1
    calls = by_name(spans, "chat ") + by_name(spans, "execute_tool ")
    assert (len(by_name(spans, "chat ")), len(by_name(spans, "execute_tool "))) == (STEPS + 1, STEPS)
    assert {c.parent_id for c in calls} == {a.span_id for a in agents}


async def test_a_local_tools_span_is_in_its_tasks_trace(
    traced: AsyncClient, receiver: OTLPReceiver, content_store: LocalContentStore, task_queue: str
):
    from noeta.builtins.tools import calculator

    provider = FakeLLMProvider(responses=[call(("c1", "calculator", {"expression": "6 * 7"})), say("42")])
    tracer = trace.get_tracer("tests")
    async with worker(traced, content_store, task_queue, [calculator], [provider]):
        with tracer.start_as_current_span("request") as caller:
            task_id = await traced.start("6 times 7", Options(provider=provider, allowed_tools=[calculator]), task_queue=task_queue)
        assert (await traced.result(task_id)).answer == "42"
    trace_id = f"{caller.get_span_context().trace_id:032x}"
    await eventually(lambda: by_name(receiver.in_trace(trace_id), "invoke_agent"))
    spans = receiver.in_trace(trace_id)
    [agent] = by_name(spans, "invoke_agent")
    [local] = by_name(spans, "execute_tool calculator")  # run as a local activity (a marker in history)
    assert local.parent_id == agent.span_id


def test_the_header_round_trips_and_a_json_traceparent_is_read_too():
    from temporalio.api.common.v1 import Payload

    from noeta.protocols.trace_context import SpanRef, span_from_bytes
    from noeta.telemetry.trace_headers import header, span_of

    ref = SpanRef(CALLER_TRACE, CALLER_SPAN, 0)
    assert len(header(ref).data) == 25 and span_of({"noeta-trace": header(ref)}) == ref
    as_json = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(ref.traceparent).encode())
    assert span_of({"noeta-trace": as_json}) == ref
    assert span_from_bytes(bytes(25)) is None and span_from_bytes(b"short") is None
