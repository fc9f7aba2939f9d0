"""Local tools (``@tool(local=True)``): run as local activities, with the same retries, event log
and exactly-once keys as any tool, and bounded at declaration."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from noeta.builtins.tools import BUILTIN_TOOLS
from noeta.client.projection.payloads import decode_first
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ConfigurationError, ToolDefinitionError, ToolRetryableError
from noeta.mcp.config import parse_server
from noeta.protocols.local_tools import LOCAL_TOOL_MAX_TIMEOUT_SECONDS
from noeta.protocols.activity_io import PrepareOutput
from noeta.protocols.names import INVOKE_TOOL, PATCH_LOCAL_TOOLS, PREPARED_SHAPE, SHAPE_LOCAL_TOOLS_BY_DATA
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry
from noeta.workflows import local_tools, patches
from tests.support.cancellation import cancel_during_a_tool
from tests.support.local_calls import scheduled_and_markers
from tests.support.processes import killed_and_replaced, worker_env
from tests.support.replay import replay
from tests.support.scripts import call, say
from tests.support.waiting import eventually

SCHEMA = {"type": "object"}


async def tool_activity_events(client: AsyncClient, task_id: str) -> tuple[int, int]:
    """(invoke tool activities scheduled, its local-activity markers) in the task's history."""
    return await scheduled_and_markers(client, task_id, INVOKE_TOOL)


def test_builtins_that_cannot_block_are_local():
    local = {t.name for t in BUILTIN_TOOLS if t.local}
    assert local == {"calculator", "word_count", "current_time"}
    assert all(t.timeout_seconds is None and t.heartbeat_seconds is None for t in BUILTIN_TOOLS if t.local)


def test_a_local_tool_above_the_limit_or_with_a_heartbeat_is_refused():
    def fn(arguments, ctx):
        return ToolResult(success=True)

    with pytest.raises(ToolDefinitionError) as info:
        tool(fn, name="slow", version="1", input_schema=SCHEMA, local=True, timeout_seconds=LOCAL_TOOL_MAX_TIMEOUT_SECONDS + 1)
    assert str(info.value) == (
        "tool 'slow': a local tool's timeout_seconds must be above 0 and at most 30 s, got 31; "
        "declare a longer tool without local=True"
    )
    with pytest.raises(ToolDefinitionError):
        tool(fn, name="beating", version="1", input_schema=SCHEMA, local=True, heartbeat_seconds=5)
    # At the limit it is accepted; the same timeout without local=True is an ordinary tool.
    assert tool(fn, name="ok", version="1", input_schema=SCHEMA, local=True, timeout_seconds=30).local
    assert not tool(fn, name="ok", version="1", input_schema=SCHEMA, timeout_seconds=300).local

    class Handmade:  # a class-based tool is checked when it is registered
        name, version, description, input_schema, risk_level = "handmade", "1", "", SCHEMA, "low"
        local, timeout_seconds = True, 120.0

        def invoke(self, arguments, ctx):
            return ToolResult(success=True)

    registry = Registry.of()
    with pytest.raises(ToolDefinitionError):
        registry.add_tool(Handmade())
    assert "handmade" not in registry.tools


def test_an_mcp_server_can_be_local():
    assert parse_server("calc", {"type": "stdio", "command": "calc-server", "local": True}).local
    assert not parse_server("calc", {"type": "http", "url": "https://example.com/mcp"}).local
    with pytest.raises(ConfigurationError):
        parse_server("calc", {"type": "stdio", "command": "calc-server", "local": "yes"})


async def test_a_local_tool_is_retried_up_to_max_retries_and_logged_as_local(client: AsyncClient, serve, task_queue):
    attempts = []

    @tool(name="flaky", version="1", input_schema=SCHEMA, max_retries=2, local=True)
    def flaky(arguments, ctx):
        attempts.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt < 3:
            raise ToolRetryableError(f"backend busy (attempt {ctx.attempt})")
        return ToolResult(success=True, output="ok at last")

    provider = FakeLLMProvider(responses=[call(("c1", "flaky", {"n": 1})), say("done")])
    async with serve(tools=[flaky], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[flaky]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    run_id = (await client.temporal.get_workflow_handle(task_id).describe()).run_id
    # One key for every attempt: the engine's, as for any tool.
    assert attempts == [(1, f"{task_id}/{run_id}/1"), (2, f"{task_id}/{run_id}/1"), (3, f"{task_id}/{run_id}/1")]
    assert await tool_activity_events(client, task_id) == (0, 1)
    envs = await client.events(task_id)
    [started] = [e.payload for e in envs if e.type == "ToolCallStarted"]
    assert (started.call_id, started.tool_name, started.arguments, started.local) == ("c1", "flaky", {"n": 1}, True)
    assert [(e.payload.attempt, e.payload.error) for e in envs if e.type == "ToolCallRetried"] == [
        (1, "backend busy (attempt 1)"),
        (2, "backend busy (attempt 2)"),
    ]
    [completed] = [e.payload for e in envs if e.type == "ToolCallCompleted"]
    assert (completed.call_id, completed.attempt, completed.success, completed.local) == ("c1", 3, True, True)
    [result] = [b for e in envs if e.type == "MessagesAppended" and e.actor == "tool:flaky" for m in e.payload.messages for b in m.content]
    assert (result.call_id, result.output) == ("c1", "ok at last")


async def test_a_local_tool_that_keeps_failing_goes_back_to_the_model(client: AsyncClient, serve, task_queue):
    attempts = []

    @tool(name="down", version="1", input_schema=SCHEMA, max_retries=1, local=True)
    def down(arguments, ctx):
        attempts.append(ctx.attempt)
        raise ToolRetryableError("backend down")

    provider = FakeLLMProvider(responses=[call(("c1", "down", {})), say("gave up on it")])
    async with serve(tools=[down], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[down]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "gave up on it"
    assert attempts == [1, 2]
    [block] = [b for m in provider.received_requests[1].messages for b in m.content if getattr(b, "type", "") == "tool_result"]
    assert (block.success, block.output) == (False, "tool 'down' failed after retries: backend down")
    envs = await client.events(task_id)
    [failed] = [e.payload for e in envs if e.type == "ToolCallFailed"]
    assert (failed.call_id, failed.attempt, failed.error_type, failed.local) == ("c1", 2, "ToolRetryableError", True)
    assert [e.payload.attempt for e in envs if e.type == "ToolCallRetried"] == [1]
    [projected] = [b for e in envs if e.type == "MessagesAppended" and e.actor == "tool:down" for m in e.payload.messages for b in m.content]
    assert projected.output == block.output


async def test_parallel_local_and_ordinary_calls_form_one_round_in_call_order(client: AsyncClient, serve, task_queue):
    @tool(name="slowish", version="1", input_schema=SCHEMA, local=True)
    async def slowish(arguments, ctx):
        await asyncio.sleep(arguments["s"])
        return ToolResult(success=True, output=f"slept {arguments['s']}")

    @tool(name="ordinary", version="1", input_schema=SCHEMA)
    def ordinary(arguments, ctx):
        return ToolResult(success=True, output="plain")

    provider = FakeLLMProvider(
        responses=[call(("a", "slowish", {"s": 0.5}), ("b", "ordinary", {}), ("c", "slowish", {"s": 0})), say("done")]
    )
    async with serve(tools=[slowish, ordinary], providers=[provider]):
        options = Options(provider=provider, allowed_tools=[slowish, ordinary])
        task_id = await client.start("x", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    assert await tool_activity_events(client, task_id) == (1, 2)
    sent = [b.call_id for m in provider.received_requests[1].messages for b in m.content if getattr(b, "type", "") == "tool_result"]
    assert sent == ["a", "b", "c"]
    envs = await client.events(task_id)
    [round_] = [e.payload.messages for e in envs if e.type == "MessagesAppended" and e.actor.startswith("tool:")]
    assert [b.call_id for b in round_[0].content] == ["a", "b", "c"]
    assert {e.payload.call_id: e.payload.local for e in envs if e.type == "ToolCallCompleted"} == {"a": True, "b": False, "c": True}


async def test_a_new_task_runs_its_local_tools_by_its_recorded_shape_without_a_patch(
    client: AsyncClient, serve, task_queue
):
    """The tool's recorded ``local`` flag decides: no patch marker and no TemporalChangeVersion
    upsert (tasks prepared before SHAPE_LOCAL_TOOLS_BY_DATA still ask PATCH_LOCAL_TOOLS: their
    recorded histories replay in tests/test_replay.py)."""

    @tool(name="quick", version="1", input_schema=SCHEMA, local=True)
    def quick(arguments, ctx):
        return ToolResult(success=True, output="q")

    provider = FakeLLMProvider(responses=[call(("c1", "quick", {})), call(("c2", "quick", {})), say("done")])
    async with serve(tools=[quick], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[quick]), task_queue=task_queue)
        await client.result(task_id)
    history = await client.temporal.get_workflow_handle(task_id).fetch_history()
    markers = [e.marker_recorded_event_attributes for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert [m.marker_name for m in markers if m.marker_name != "core_local_activity"] == []
    upserts = [
        e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for e in history.events if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    assert not any("TemporalChangeVersion" in fields for fields in upserts)
    prepared = decode_first(markers[0].details["result"], PrepareOutput)
    assert prepared.shape == PREPARED_SHAPE >= SHAPE_LOCAL_TOOLS_BY_DATA
    assert await tool_activity_events(client, task_id) == (0, 2)


async def test_a_patch_marker_that_a_worker_of_the_previous_release_recorded_replays(
    client: AsyncClient, serve, task_queue, monkeypatch: pytest.MonkeyPatch
):
    """During a rollout a worker of the release before shapes may run the local calls of a task
    that a new worker prepared (shape recorded): it asks the patch, and records its marker. New
    workers must replay that history, not fail it for good once the old workers are gone."""

    def previous_release(task, spec, shape):  # the code before SHAPE_LOCAL_TOOLS_BY_DATA
        return spec is not None and spec.local and patches.patched(PATCH_LOCAL_TOOLS)

    @tool(name="quick", version="1", input_schema=SCHEMA, local=True)
    def quick(arguments, ctx):
        return ToolResult(success=True, output="q")

    provider = FakeLLMProvider(responses=[call(("c1", "quick", {})), call(("c2", "quick", {})), say("done")])
    with monkeypatch.context() as patched_worker:
        patched_worker.setattr(local_tools, "runs_locally", previous_release)
        async with serve(tools=[quick], providers=[provider]):
            task_id = await client.start("x", Options(provider=provider, allowed_tools=[quick]), task_queue=task_queue)
            assert (await client.result(task_id)).answer == "done"
    history = await client.temporal.get_workflow_handle(task_id).fetch_history()
    markers = [e.marker_recorded_event_attributes for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert [m.marker_name for m in markers].count("core_patch") == 1
    assert decode_first(markers[0].details["result"], PrepareOutput).shape >= SHAPE_LOCAL_TOOLS_BY_DATA
    assert await replay(history) is None


@pytest.mark.slow
async def test_a_worker_killed_during_a_local_tool_the_step_completes_on_another(
    client: AsyncClient, settings, data_dir: Path, task_queue: str, tmp_path: Path
):
    log = tmp_path / "tool.log"
    env = worker_env(TEMPORAL_ADDRESS=settings.temporal_address, NOETA_HOME=str(data_dir), NOETA_TEST_LOG=str(log))
    registry = "tests.support.registry:local_registry"
    replaced = await killed_and_replaced(
        env, task_queue, registry,
        start=lambda: client.start(
            "hello", Options(provider="scripted", allowed_tools=["local_slow_append"]), task_queue=task_queue
        ),
        killed_when=lambda: log.exists() and "start" in log.read_text(),
        finish=client.result, finish_timeout=90,
    )
    task_id, result = replaced.task_id, replaced.result
    assert (result.status, result.answer) == ("completed", "done: appended hello")
    run_id = (await client.temporal.get_workflow_handle(task_id).describe()).run_id
    key = f"{task_id}/{run_id}/1"
    # A lost worker is not a failed attempt: the next worker starts the call again at attempt 1.
    assert log.read_text().splitlines() == [
        f"start {key} attempt=1 pid={replaced.killed_pid}",
        f"start {key} attempt=1 pid={replaced.second_pid}",
        f"done {key} attempt=1 pid={replaced.second_pid}",
    ]
    assert await tool_activity_events(client, task_id) == (0, 1)
    [completed] = [e.payload for e in await client.events(task_id) if e.type == "ToolCallCompleted"]
    assert (completed.attempt, completed.local, completed.success) == (1, True, True)


async def test_a_five_step_task_with_a_local_tool_costs_these_events(client: AsyncClient, serve, task_queue):
    """The count a change must not raise silently (bench/RESULTS.md has the breakdown): 5 steps
    of one model call and one local tool call, then the answer."""
    from noeta.builtins.tools import calculator

    steps = [call((f"c{n}", "calculator", {"expression": f"{n} + 1"})) for n in range(5)]
    provider = FakeLLMProvider(responses=[*steps, say("done")])
    async with serve(tools=[calculator], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[calculator]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    history = await client.temporal.get_workflow_handle(task_id).fetch_history()
    kinds = [EventType.Name(e.event_type) for e in history.events]
    workflow_tasks = kinds.count("EVENT_TYPE_WORKFLOW_TASK_COMPLETED")
    assert (len(kinds), workflow_tasks) == (49, 7), kinds



async def test_a_local_tool_waits_for_its_guard_and_approval_like_any_tool(client: AsyncClient, serve, task_queue):
    from tests.test_guards import AmountGuard

    wired = []

    @tool(name="wire_money", version="1", input_schema=SCHEMA, local=True)
    def local_wire(arguments, ctx):
        wired.append(arguments["amount"])
        return ToolResult(success=True, output=f"wired {arguments['amount']}")

    provider = FakeLLMProvider(
        responses=[call(("c1", "wire_money", {"amount": 5_000_000}), ("c2", "wire_money", {"amount": 2500})), say("ok")]
    )
    options = Options(provider=provider, allowed_tools=[local_wire], guards=[AmountGuard()])
    async with serve(tools=[local_wire], providers=[provider], guards=[AmountGuard()]):
        task_id = await client.start("pay", options, task_queue=task_queue)
        await eventually(lambda: pending_approval(client, task_id))
        assert wired == []  # nothing runs while a human is asked
        await client.approve(task_id, "c2", approved=True, approver="alice")
        assert (await client.result(task_id)).answer == "ok"
    assert wired == [2500]  # the denied call never ran
    blocks = {b.call_id: b.output for m in provider.received_requests[1].messages for b in m.content if getattr(b, "type", "") == "tool_result"}
    assert blocks == {"c1": "Denied by guard 'amount': amount above the hard limit", "c2": "wired 2500"}
    assert await tool_activity_events(client, task_id) == (0, 1)
    types = [e.type for e in await client.events(task_id)]
    assert types.index("ApprovalGranted") < types.index("ToolCallStarted") < types.index("ToolCallCompleted")


async def pending_approval(client: AsyncClient, task_id: str) -> bool:
    return bool(await client.pending_approvals(task_id))


async def test_cancelling_the_task_cancels_a_running_local_tool(client: AsyncClient, serve, task_queue):
    await cancel_during_a_tool(client, serve, task_queue, 25, local=True, timeout_seconds=30)


async def test_an_mcp_server_configured_local_is_called_as_a_local_activity(client: AsyncClient, content_store, task_queue):
    from noeta.worker import build_worker
    from tests.support.mcp_server import running_http_server

    provider = FakeLLMProvider(responses=[call(("c1", "mcp__web__add", {"a": 2, "b": 40})), say("42")])
    registry = Registry.of(providers=[provider], content_store=content_store)
    with running_http_server() as url:
        options = Options(provider=provider, mcp_servers={"web": {"type": "http", "url": url, "local": True}})
        async with build_worker(client.temporal, registry, task_queue):
            task_id = await client.start("add", options, task_queue=task_queue)
            assert (await client.result(task_id)).answer == "42"
    [block] = [b for m in provider.received_requests[1].messages for b in m.content if getattr(b, "type", "") == "tool_result"]
    assert (block.success, block.output) == (True, "42")
    assert await tool_activity_events(client, task_id) == (0, 1)
    [completed] = [e.payload for e in await client.events(task_id) if e.type == "ToolCallCompleted"]
    assert (completed.tool_name, completed.local) == ("mcp__web__add", True)
