"""Traces, metrics and logs of a real task with a tool call: spans collected in-process with the
OpenTelemetry SDK's in-memory exporter, the worker's Prometheus endpoint scraped over HTTP,
log lines captured from Noeta's handler."""

from __future__ import annotations

import io
import json
import logging
import re
import socket

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.options import HostConfig, Options
from noeta.context.content_store import LocalContentStore
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.providers.pricing import ModelPrice, PriceTable
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.telemetry import tracing
from noeta.telemetry.logs import configure_logging
from noeta.telemetry.metrics import runtime_for, telemetry_config
from noeta.worker import Registry, build_worker
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.waiting import eventually

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    """The process's tracer provider, exporting to memory (OpenTelemetry allows one per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    return _exporter


#: gpt-test's price on the worker of these tests: $1000 / $2000 per million input / output tokens.
PRICES = PriceTable({"gpt-test": ModelPrice(input_per_mtok=1000, output_per_mtok=2000)})


async def run_with_tool(client: AsyncClient, store: LocalContentStore, task_queue: str, tools=(add,)) -> str:
    provider = FakeLLMProvider(responses=[call(("c1", tools[0].name, {"a": 2, "b": 3})), say("5")])
    registry = Registry.of(tools=tools, providers=[provider], content_store=store)
    registry.prices = PRICES
    async with build_worker(client.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
        task_id = await client.start(
            "add 2 and 3", Options(provider=provider, model="gpt-test", allowed_tools=list(tools)), task_queue=task_queue
        )
        assert (await client.result(task_id)).answer == "5"
    return task_id


async def test_spans_of_a_task_with_a_tool_call(
    spans: InMemorySpanExporter, settings: Settings, content_store: LocalContentStore, task_queue: str
):
    assert tracing.tracing_enabled({})  # the SDK provider installed above turns tracing on
    assert not tracing.tracing_enabled({"OTEL_SDK_DISABLED": "true"})
    spans.clear()
    client = await AsyncClient.connect(HostConfig(settings=settings, content_store=content_store))
    task_id = await run_with_tool(client, content_store, task_queue)

    started, agent = [s for s in spans.get_finished_spans() if s.attributes.get("gen_ai.agent.id") == task_id]
    # Exported at the run's start (so a waiting task shows it) and again, whole, at its end.
    assert (started.attributes["noeta.span.phase"], agent.attributes["noeta.span.phase"]) == ("started", "ended")
    assert (started.context.span_id, started.start_time) == (agent.context.span_id, agent.start_time)
    finished = [s for s in spans.get_finished_spans() if s.context.trace_id == agent.context.trace_id]
    chat = [s for s in finished if s.name == "chat gpt-test"]
    [tool_span] = [s for s in finished if s.name == "execute_tool add"]
    assert len(chat) == 2
    # One trace: the run's invoke_agent span (a root: the client had no trace) and its calls.
    assert agent.name == "invoke_agent noeta" and agent.parent is None
    assert {s.parent.span_id for s in [*chat, tool_span]} == {agent.context.span_id}
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.request.model"] == "gpt-test"
    assert agent.attributes["gen_ai.usage.input_tokens"] == 20 and agent.attributes["noeta.status"] == "completed"
    assert agent.start_time <= min(s.start_time for s in chat) and agent.end_time >= tool_span.end_time

    first = min(chat, key=lambda s: s.start_time)
    assert first.kind == trace.SpanKind.CLIENT
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "gpt-test"
    assert first.attributes["gen_ai.provider.name"] == "fake"  # who serves it, not a class name
    assert first.attributes["gen_ai.response.model"] == "gpt-test"
    assert first.attributes["gen_ai.usage.input_tokens"] == 10
    assert first.attributes["gen_ai.usage.output_tokens"] == 3
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("tool_use",)
    assert first.attributes["gen_ai.conversation.id"] == task_id
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["gen_ai.tool.name"] == "add"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "c1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the Prometheus sample ``name`` whose labels include ``labels``."""
    for line in text.splitlines():
        match = re.fullmatch(r"(\w+)\{(.*)\} (\S+)", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    raise AssertionError(f"no sample {name}{labels} in:\n" + "\n".join(l for l in text.splitlines() if name in l))


async def test_metrics_endpoint_after_a_task(
    settings: Settings, content_store: LocalContentStore, task_queue: str, monkeypatch: pytest.MonkeyPatch
):
    address = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "billing-agents")
    runtime = runtime_for(address)
    assert runtime is not None
    client = await AsyncClient.connect(HostConfig(settings=settings, content_store=content_store, runtime=runtime))
    task_id = await run_with_tool(client, content_store, task_queue)
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://{address}/metrics")).text

    # The cost series is the task's recorded cost (two calls: 20 input and 8 output tokens).
    recorded = (await client.result(task_id)).usage.cost_usd
    assert recorded == pytest.approx((20 * 1000 + 8 * 2000) / 1e6)
    cost = sample(text, "noeta_cost_usd_total", provider="fake", model="gpt-test", task_queue=task_queue)
    assert cost == pytest.approx(recorded)
    assert sample(text, "noeta_model_tokens_total", provider="fake", model="gpt-test", kind="output", task_queue=task_queue) == 8

    assert sample(text, "noeta_model_tokens_total", model="gpt-test", kind="input", task_queue=task_queue) == 20
    assert sample(text, "noeta_model_tokens_total", model="gpt-test", kind="output", task_queue=task_queue) == 8
    assert sample(text, "noeta_model_calls_total", model="gpt-test", outcome="ok", task_queue=task_queue) == 2
    assert sample(text, "noeta_tool_calls_total", tool="add", outcome="ok", task_queue=task_queue) == 1
    assert sample(text, "noeta_tool_call_duration_count", tool="add", task_queue=task_queue) == 1
    assert sample(text, "noeta_tool_call_duration_bucket", tool="add", le="300", task_queue=task_queue) == 1
    assert sample(text, "noeta_tasks_finished_total", status="completed", task_queue=task_queue) == 1
    # Temporal's own SDK metrics come out of the same endpoint.
    assert sample(text, "temporal_activity_execution_latency_count", activity_type="noeta.invoke_tool", task_queue=task_queue) == 1
    # Every series carries the configured service, not the SDK core's own name.
    assert sample(text, "noeta_model_calls_total", service_name="billing-agents", outcome="ok", task_queue=task_queue) == 2
    assert sample(text, "temporal_activity_execution_latency_count", service_name="billing-agents", activity_type="noeta.invoke_tool", task_queue=task_queue) == 1
    assert "temporal-core-sdk" not in text


def test_metrics_configuration_from_environment():
    assert telemetry_config(None, {}) is None
    prometheus = telemetry_config("127.0.0.1:9464", {})
    assert prometheus is not None and prometheus.metrics.bind_address == "127.0.0.1:9464"
    otlp = telemetry_config(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=abc"})
    assert otlp is not None and otlp.metrics.url == "http://collector:4318" and otlp.metrics.http
    assert dict(otlp.metrics.headers) == {"api-key": "abc"}
    assert (dict(otlp.global_tags), otlp.attach_service_name) == ({"service.name": "noeta"}, False)
    named = telemetry_config("127.0.0.1:9464", {"OTEL_SERVICE_NAME": "billing-agents"})
    assert named is not None and (dict(named.global_tags), named.attach_service_name) == ({"service_name": "billing-agents"}, False)
    assert telemetry_config(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_METRICS_EXPORTER": "none"}) is None


@tool(name="chatty", version="1", input_schema={"type": "object"}, description="Logs a line.")
def chatty(arguments: dict, ctx: ToolContext) -> ToolResult:
    logging.getLogger("tests.chatty").info("looking at %d things", len(arguments))
    return ToolResult(success=True, output="5")


async def test_json_logs_carry_task_call_and_attempt(client: AsyncClient, content_store: LocalContentStore, task_queue: str):
    stream = io.StringIO()
    handler = configure_logging("INFO", json_format=True, stream=stream)
    try:
        task_id = await run_with_tool(client, content_store, task_queue, tools=(chatty,))
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(logging.WARNING)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    [entry] = [e for e in lines if e["logger"] == "tests.chatty"]
    assert entry["message"] == "looking at 2 things" and entry["level"] == "INFO"
    assert (entry["task_id"], entry["call_id"], entry["attempt"]) == (task_id, "c1", 1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"])


async def test_json_logs_name_the_span_they_were_written_in(
    spans: InMemorySpanExporter, client: AsyncClient, content_store: LocalContentStore, task_queue: str
):
    stream = io.StringIO()
    handler = configure_logging("INFO", json_format=True, stream=stream)
    spans.clear()
    try:
        task_id = await run_with_tool(client, content_store, task_queue, tools=(chatty,))
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(logging.WARNING)
    [entry] = [e for e in map(json.loads, stream.getvalue().splitlines()) if e["logger"] == "tests.chatty"]
    [tool_span] = [s for s in spans.get_finished_spans() if s.name == "execute_tool chatty" and s.attributes["gen_ai.conversation.id"] == task_id]
    assert (entry["trace_id"], entry["span_id"]) == (f"{tool_span.context.trace_id:032x}", f"{tool_span.context.span_id:016x}")


def test_a_plain_temporal_client_with_tracing_names_the_callers_span():
    """temporalio's TracingInterceptor writes its carrier under its own header: read as the caller."""
    from temporalio.converter import DataConverter

    from noeta.protocols.names import HEADER_TEMPORAL_TRACER
    from noeta.protocols.trace_context import SpanRef
    from noeta.telemetry.trace_headers import header, span_of

    caller = SpanRef("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    [carrier] = DataConverter.default.payload_converter.to_payloads([{"traceparent": caller.traceparent}])
    assert span_of({HEADER_TEMPORAL_TRACER: carrier}) == caller
    ours = SpanRef("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    assert span_of({HEADER_TEMPORAL_TRACER: carrier, "noeta-trace": header(ours)}) == ours  # Noeta's own first
    assert span_of({}) is None


def test_an_instrumented_resource_call_is_a_span(spans: InMemorySpanExporter):
    from noeta.resources.instrument import instrument

    class Counter:
        def incr(self, key: str) -> int:
            return 1

        def fail(self, key: str) -> None:
            raise KeyError(key)

    counter = instrument(Counter(), name="counter", ops=["incr", "fail"], derive=lambda c: {"key": c.args[0]})
    spans.clear()
    assert counter.incr("a") == 1
    with pytest.raises(KeyError):
        counter.fail("b")
    ok, failed = spans.get_finished_spans()
    assert (ok.name, ok.attributes["noeta.resource.op"], ok.attributes["noeta.resource.key"]) == ("counter.incr", "incr", "a")
    assert (failed.name, failed.attributes["error.type"], failed.status.status_code.name) == ("counter.fail", "KeyError", "ERROR")


async def test_message_content_on_spans_only_when_asked(
    spans: InMemorySpanExporter, client: AsyncClient, content_store: LocalContentStore, task_queue: str, monkeypatch
):
    from noeta.telemetry import content

    monkeypatch.setattr(content, "_capture", True)  # OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
    spans.clear()
    task_id = await run_with_tool(client, content_store, task_queue)
    first, second = sorted(
        (s for s in spans.get_finished_spans() if s.name == "chat gpt-test" and s.attributes["gen_ai.conversation.id"] == task_id),
        key=lambda s: s.start_time,
    )
    sent = json.loads(first.attributes["gen_ai.input.messages"])
    assert sent[-1] == {"role": "user", "parts": [{"type": "text", "content": "add 2 and 3"}]}
    answered = json.loads(first.attributes["gen_ai.output.messages"])
    assert answered[0]["parts"][0] == {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}
    # The second call was sent the tool's result.
    results = [p for m in json.loads(second.attributes["gen_ai.input.messages"]) for p in m["parts"] if p["type"] == "tool_call_response"]
    assert results == [{"type": "tool_call_response", "id": "c1", "response": "5"}]


async def test_approval_wait_and_decisions_on_the_metrics_endpoint(settings: Settings, content_store: LocalContentStore, task_queue: str):
    from tests.test_guards import AmountGuard, wire_money

    address = f"127.0.0.1:{free_port()}"
    runtime = runtime_for(address)
    assert runtime is not None
    client = await AsyncClient.connect(HostConfig(settings=settings, content_store=content_store, runtime=runtime))
    provider = FakeLLMProvider(responses=[call(("c1", "wire_money", {"amount": 2000}), ("c2", "wire_money", {"amount": 3000})), say("ok")])
    registry = Registry.of(tools=[wire_money], providers=[provider], content_store=content_store, guards=[AmountGuard()])
    async with build_worker(client.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
        options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
        task_id = await client.start("pay twice", options, task_queue=task_queue)
        async def both_waiting() -> bool:
            return len(await client.pending_approvals(task_id)) == 2

        await eventually(both_waiting)
        await client.approve(task_id, "c1", approved=True, approver="alice")
        await client.approve(task_id, "c2", approved=False, approver="bob")
        assert (await client.result(task_id)).answer == "ok"
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://{address}/metrics")).text
    assert sample(text, "noeta_approval_wait_count", decision="approved", task_queue=task_queue) == 1
    assert sample(text, "noeta_approval_wait_count", decision="refused", task_queue=task_queue) == 1
    assert sample(text, "noeta_approval_wait_bucket", decision="refused", le="86400", task_queue=task_queue) == 1
    assert sample(text, "noeta_approvals_decided_total", decision="refused", task_queue=task_queue) == 1


async def test_replaying_a_history_with_tracing_on_exports_no_span(spans: InMemorySpanExporter):
    """The invoke_agent span is made by the worker that runs a run's end, never while replaying:
    a worker that replays a task (after a restart, or a cache eviction) does not export it again."""
    from pathlib import Path

    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from noeta.telemetry.agent_span import AgentSpanInterceptor
    from noeta.worker.plugin import NoetaPlugin
    from noeta.workflows import WORKFLOWS

    path = Path(__file__).parent / "histories" / "refuse-update" / "refusals.json"
    history = WorkflowHistory.from_json("history-refusals", path.read_text())
    spans.clear()
    replayer = Replayer(
        workflows=list(WORKFLOWS), plugins=[NoetaPlugin()], interceptors=[AgentSpanInterceptor(enabled=True)], debug_mode=True
    )
    assert (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure is None
    assert [s.name for s in spans.get_finished_spans() if s.name.startswith("invoke_agent")] == []
