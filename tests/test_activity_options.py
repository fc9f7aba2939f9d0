"""ActivityOptions per kind of activity: what a task schedules (read back from its history), what
a worker does with it (timeouts, backoff), and the ranges every entry refuses."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from temporalio.api.enums.v1 import EventType

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ConfigurationError, ToolRetryableError
from noeta.http.models import TaskOptions
from noeta.protocols.activity_io import InvokeToolOutput
from noeta.protocols.activity_options import ActivityOptions
from noeta.protocols.hooks import VerdictResult
from noeta.protocols.messages import LLMRequest, ToolResultBlock
from noeta.protocols.task import TASK_FATAL_TOOL_ERRORS
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.protocols.validation import expect_validator
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker
from tests.support.mcp_server import running_http_server
from tests.support.scripts import call, say

NO_INPUT = {"type": "object", "properties": {}}
FATAL = list(TASK_FATAL_TOOL_ERRORS)


@tool(name="plain", version="1", input_schema=NO_INPUT)
def plain(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output="ok")


@tool(name="own", version="1", input_schema=NO_INPUT, timeout_seconds=7, heartbeat_seconds=3, max_retries=1)
def own(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output="ok")


@tool(name="slow", version="1", input_schema=NO_INPUT)
async def slow(arguments: dict, ctx: ToolContext) -> ToolResult:
    await asyncio.sleep(20)
    return ToolResult(success=True, output="too late")


@tool(name="flaky", version="1", input_schema=NO_INPUT)
def flaky(arguments: dict, ctx: ToolContext) -> ToolResult:
    if ctx.attempt <= 2:
        raise ToolRetryableError(f"not yet (attempt {ctx.attempt})")
    return ToolResult(success=True, output="third time")


class AllowAll:
    name = "allow-all"

    def check(self, action: object, ctx: object) -> VerdictResult:
        return VerdictResult("allow")


YES = expect_validator(lambda data: True, name="yes")


def scheduled_options(history: list) -> list[tuple]:
    """Every scheduled activity's type, timeouts and retry policy, in seconds, in order."""
    rows = []
    for event in history:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        a = event.activity_task_scheduled_event_attributes
        r = a.retry_policy
        rows.append((
            a.activity_type.name,
            a.start_to_close_timeout.ToTimedelta().total_seconds(),
            a.schedule_to_close_timeout.ToTimedelta().total_seconds(),
            a.heartbeat_timeout.ToTimedelta().total_seconds(),
            r.initial_interval.ToTimedelta().total_seconds(),
            r.backoff_coefficient,
            r.maximum_interval.ToTimedelta().total_seconds(),
            r.maximum_attempts,
            list(r.non_retryable_error_types),
        ))
    return rows


async def run_every_kind(client: AsyncClient, content_store, task_queue: str, **activity_options: ActivityOptions) -> list[tuple]:
    """A task that makes a model call, calls a plain tool, a tool with its own settings and a remote
    MCP tool, passes a guard and a validator; the options its history scheduled."""
    provider = FakeLLMProvider(responses=[call(("c1", "plain", {}), ("c2", "own", {}), ("c3", "mcp__web__echo", {"text": "x"})), say("done")])
    registry = Registry.of(
        tools=[plain, own], providers=[provider], validators=[YES], guards=[AllowAll()], content_store=content_store
    )
    with running_http_server() as url:
        options = Options(
            provider=provider, allowed_tools=[plain, own], guards=[AllowAll()], validators=[YES],
            mcp_servers={"web": {"type": "http", "url": url}}, **activity_options,
        )
        async with build_worker(client.temporal, registry, task_queue):
            task_id = await client.start("go", options, task_queue=task_queue)
            result = await client.result(task_id)
    assert result.status == "completed"
    return scheduled_options(await client.history(task_id))


async def test_a_default_task_schedules_the_values_it_always_had(client: AsyncClient, content_store, task_queue):
    # The values the steps hard-coded before ActivityOptions existed (checked against that code).
    model = ("noeta.call_model", 300, 0, 10, 1, 2.0, 10, 1014, [])
    guard = ("noeta.check_guards", 60, 0, 10, 1, 2.0, 60, 4, [])
    assert await run_every_kind(client, content_store, task_queue) == [
        model,
        guard,
        ("noeta.invoke_tool", 300, 0, 10, 1, 2.0, 10, 1014, FATAL),
        ("noeta.invoke_tool", 7, 0, 3, 1, 2.0, 10, 1012, FATAL),  # the tool's own timeout and heartbeat
        ("noeta.invoke_tool", 300, 0, 10, 1, 2.0, 10, 1014, FATAL),  # the MCP tool
        model,
        guard,
        ("noeta.validate_output", 300, 0, 10, 1, 2.0, 60, 4, []),
    ]


async def test_each_kind_schedules_its_own_options(client: AsyncClient, content_store, task_queue):
    rows = await run_every_kind(
        client, content_store, task_queue,
        model_activity=ActivityOptions(
            start_to_close_seconds=41, schedule_to_close_seconds=900, heartbeat_seconds=4,
            retry_initial_seconds=0.5, retry_backoff_coefficient=3, retry_max_seconds=20,
        ),
        tool_activity=ActivityOptions(
            start_to_close_seconds=42, heartbeat_seconds=5, retry_initial_seconds=2, retry_backoff_coefficient=1.5,
            retry_max_seconds=5,
        ),
        mcp_activity=ActivityOptions(start_to_close_seconds=43, schedule_to_close_seconds=600, heartbeat_seconds=6),
        # A guard that does slow I/O gets more than the default minute.
        guard_activity=ActivityOptions(start_to_close_seconds=120, heartbeat_seconds=30, retry_max_seconds=90),
        validator_activity=ActivityOptions(
            start_to_close_seconds=44, retry_initial_seconds=3, retry_backoff_coefficient=1, retry_max_seconds=3
        ),
    )
    # Model and tool calls: Temporal's own backoff only retries lost attempts, capped at 10 s.
    model = ("noeta.call_model", 41, 900, 4, 0.5, 3.0, 10, 1014, [])
    guard = ("noeta.check_guards", 120, 0, 30, 1, 2.0, 90, 4, [])
    assert rows == [
        model,
        guard,
        ("noeta.invoke_tool", 42, 0, 5, 2, 1.5, 5, 1014, FATAL),
        ("noeta.invoke_tool", 7, 0, 3, 2, 1.5, 5, 1012, FATAL),  # the tool's own settings still win
        ("noeta.invoke_tool", 43, 600, 6, 1, 2.0, 10, 1014, FATAL),
        model,
        guard,
        ("noeta.validate_output", 44, 0, 10, 3, 1.0, 3, 4, []),
    ]


def tool_results(request: LLMRequest) -> list[ToolResultBlock]:
    return [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


async def test_a_tool_past_its_start_to_close_times_out(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "slow", {})), say("gave up")])
    options = Options(
        provider=provider, allowed_tools=[slow], tool_retries=0, tool_activity=ActivityOptions(start_to_close_seconds=1.5)
    )
    started = time.monotonic()
    async with serve(tools=[slow], providers=[provider]):
        task_id = await client.start("go", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "gave up")
    assert time.monotonic() - started < 15  # the tool would have slept 20 s
    [block] = tool_results(provider.received_requests[-1])
    assert not block.success
    assert block.output == "tool 'slow' failed after retries: tool 'slow' did not finish within 1.5 s"
    [failed] = [e.payload for e in await client.events(task_id) if e.type == "ToolCallFailed"]
    assert (failed.tool_name, failed.error_type, failed.attempt) == ("slow", "ToolTimeoutError", 1)


async def test_the_worker_backs_off_as_the_kind_says(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "flaky", {})), say("done")])
    backoff = ActivityOptions(retry_initial_seconds=0.2, retry_backoff_coefficient=3, retry_max_seconds=0.5)
    options = Options(provider=provider, allowed_tools=[flaky], tool_activity=backoff)
    async with serve(tools=[flaky], providers=[provider]):
        task_id = await client.start("go", options, task_queue=task_queue)
        assert (await client.result(task_id)).status == "completed"
    history = await client.history(task_id)
    types = {e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name for e in history}
    [completed] = [
        e.activity_task_completed_event_attributes for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        and types[e.activity_task_completed_event_attributes.scheduled_event_id] == "noeta.invoke_tool"
    ]
    [out] = await client.temporal.data_converter.decode(completed.result.payloads, [InvokeToolOutput])
    assert out.result.output == "third time"
    # 0.2 s after the first failure, 0.2 × 3 = 0.6 s capped at 0.5 s after the second.
    assert [(f.attempt, f.kind, f.delay) for f in out.retried] == [(1, "failure", 0.2), (2, "failure", 0.5)]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"tool_activity": ActivityOptions(start_to_close_seconds=0)},
         "tool_activity.start_to_close_seconds must be a number above 0 to 604800, got 0"),
        ({"model_activity": ActivityOptions(heartbeat_seconds=math.nan)},
         "model_activity.heartbeat_seconds must be a number from 1 to 86400, got nan"),
        ({"guard_activity": ActivityOptions(retry_backoff_coefficient=0.5)},
         "guard_activity.retry_backoff_coefficient must be a number from 1 to 100, got 0.5"),
        ({"mcp_activity": ActivityOptions(schedule_to_close_seconds=True)},  # type: ignore[arg-type]
         "mcp_activity.schedule_to_close_seconds must be a number above 0 to 3.16224e+07, got True"),
        ({"validator_activity": ActivityOptions(retry_initial_seconds=5, retry_max_seconds=2)},
         "validator_activity.retry_max_seconds (2) must not be below validator_activity.retry_initial_seconds (5)"),
        ({"tool_activity": {"start_to_close_seconds": 5}},
         "tool_activity must be an ActivityOptions, got {'start_to_close_seconds': 5}"),
    ],
)
def test_options_refuse_activity_options_out_of_range(given, message):
    with pytest.raises(ConfigurationError) as info:
        Options(**given)
    assert str(info.value) == message


def test_http_options_carry_activity_options():
    options = TaskOptions.model_validate_json('{"guard_activity": {"start_to_close_seconds": 120}}').to_options()
    assert options.guard_activity == ActivityOptions(start_to_close_seconds=120)
    assert options.tool_activity == ActivityOptions()
