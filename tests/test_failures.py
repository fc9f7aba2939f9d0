"""Failures: provider errors, exhausted retries, tool identity changes, cancellation, bad input."""

from __future__ import annotations

import asyncio
import threading

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import Result
from noeta.client.options import Options
from noeta.errors import (
    AttemptsExhaustedError,
    ConfigurationError,
    PolicyDecisionError,
    PolicyError,
    ProviderError,
    TaskNotOpenError,
    ToolIdentityMismatchError,
    ToolNotRegisteredError,
    ToolRetryableError,
)
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.cancellation import cancel_during_a_tool
from tests.support.policies import NotADecisionPolicy
from tests.support.scripts import call, say
from tests.support.tools import add


def failing(error: Exception) -> FakeLLMProvider:
    def responder(request):
        raise error

    return FakeLLMProvider(responder=responder)


async def test_retryable_provider_errors_exhaust_into_attempts_exhausted(client: AsyncClient, serve, task_queue):
    provider = failing(ProviderError(provider="fake", message="overloaded", status=503, retryable=True))
    async with serve(providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, max_retries=1), task_queue=task_queue)
        with pytest.raises(AttemptsExhaustedError) as info:
            await client.result(task_id)
    err = info.value
    assert "All attempts exhausted" in str(err)
    assert (err.attempts, err.last_failure_type) == (2, "provider")
    assert err.issues == ["provider 'fake' (HTTP 503): overloaded"] * 2  # one per attempt
    assert len(provider.received_requests) == 2
    types = [e.type for e in await client.events(task_id)]
    assert types[-4:] == ["ProviderCallRetried", "ProviderCallFailed", "AttemptsExhausted", "TaskFailed"]


async def test_non_retryable_provider_error_fails_at_once(client: AsyncClient, serve, task_queue):
    provider = failing(ProviderError(provider="fake", message="bad request: messages.0", status=400))
    async with serve(providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, max_retries=3), task_queue=task_queue)
        with pytest.raises(ProviderError) as info:
            await client.result(task_id)
    assert (info.value.status, info.value.retryable, info.value.message) == (400, False, "bad request: messages.0")
    assert len(provider.received_requests) == 1
    assert (await client.messages(task_id))[-1] == Result("provider 'fake' (HTTP 400): bad request: messages.0", "failed")


async def test_exhausted_fake_script_fails_loudly_without_retry(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[])
    async with serve(providers=[provider]):
        task_id = await client.start("x", Options(provider=provider), task_queue=task_queue)
        with pytest.raises(ProviderError, match="IndexError: FakeLLMProvider script exhausted"):
            await client.result(task_id)
    assert len(provider.received_requests) == 1


async def test_worker_with_changed_tool_fails_the_task_clearly(client: AsyncClient, serve, task_queue):
    @tool(name="add", version="2", input_schema=add.input_schema, description=add.description)
    def add_v2(arguments, ctx):  # pragma: no cover - must never run
        raise AssertionError("a changed tool must not run")

    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 1, "b": 2})), say("no")])
    async with serve(tools=[add_v2], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[add]), task_queue=task_queue)
        with pytest.raises(ToolIdentityMismatchError, match="tool 'add' changed identity"):
            await client.result(task_id)
    assert provider.received_requests == []  # failed while recording the task's tools


async def test_tool_changed_between_start_and_call_fails_without_running(client: AsyncClient, serve, task_queue):
    # The task recorded v1 at start; the worker that picks up the call has v2.
    ran = []

    @tool(name="add", version="2", input_schema=add.input_schema)
    def add_v2(arguments, ctx):  # pragma: no cover - must never run
        ran.append(arguments)
        return ToolResult(success=True, output="wrong")

    swapped = threading.Event()

    def responder(request):  # the model answers only once the tool has been swapped
        assert swapped.wait(20)
        return call(("c1", "add", {"a": 1, "b": 2}))

    provider = FakeLLMProvider(responder=responder)
    async with serve(tools=[add], providers=[provider]) as registry:
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[add]), task_queue=task_queue)
        while not provider.received_requests:  # prepare_task has recorded v1
            await asyncio.sleep(0.01)
        registry.tools["add"] = add_v2  # a deploy swaps the tool before the call runs
        swapped.set()
        with pytest.raises(ToolIdentityMismatchError):
            await client.result(task_id)
    assert ran == []


async def test_tool_missing_on_worker(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("unused")])
    async with serve(providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=["add"]), task_queue=task_queue)
        with pytest.raises(ToolNotRegisteredError, match="'add' is not registered on this worker"):
            await client.result(task_id)


async def test_cancel_reaches_a_running_tool(client: AsyncClient, serve, task_queue):
    await cancel_during_a_tool(client, serve, task_queue, 60, heartbeat_seconds=1)


async def test_send_goal_to_a_single_goal_task_is_refused(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("only")])
    async with serve(providers=[provider]):
        task_id = await client.start("x", Options(provider=provider), task_queue=task_queue)
        await client.result(task_id)
        with pytest.raises(TaskNotOpenError):
            await client.send_goal(task_id, "more")
    assert len(provider.received_requests) == 1


@pytest.mark.parametrize("goal", ["", "   "])
async def test_empty_goal_is_rejected_before_anything_starts(client: AsyncClient, goal):
    with pytest.raises(ConfigurationError):
        await client.start(goal, Options(), task_id="never-started-empty-goal")
    with pytest.raises(Exception) as info:
        await client.temporal.get_workflow_handle("never-started-empty-goal").describe()
    assert "not found" in str(info.value).lower()


async def test_tool_marked_retryable_is_retried_and_each_retry_projected(client: AsyncClient, serve, task_queue):
    attempts = []

    @tool(name="flaky", version="1", input_schema={"type": "object"}, max_retries=2)
    def flaky(arguments, ctx):
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ToolRetryableError(f"backend busy (attempt {ctx.attempt})")
        return ToolResult(success=True, output="ok at last")

    provider = FakeLLMProvider(responses=[call(("c1", "flaky", {})), say("done")])
    async with serve(tools=[flaky], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[flaky]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    assert attempts == [1, 2, 3]
    envs = await client.events(task_id)
    assert [(e.payload.attempt, e.payload.error) for e in envs if e.type == "ToolCallRetried"] == [
        (1, "backend busy (attempt 1)"),
        (2, "backend busy (attempt 2)"),
    ]
    assert [e.payload.attempt for e in envs if e.type == "ToolCallCompleted"] == [3]


async def test_tool_timeout_goes_back_to_the_model_after_retries(client: AsyncClient, serve, task_queue):
    @tool(name="stuck", version="1", input_schema={"type": "object"}, timeout_seconds=3, max_retries=1)
    async def stuck(arguments, ctx):
        await asyncio.sleep(30)

    provider = FakeLLMProvider(responses=[call(("c1", "stuck", {})), say("gave up on it")])
    async with serve(tools=[stuck], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[stuck]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "gave up on it"
    [block] = [b for m in provider.received_requests[1].messages for b in m.content if getattr(b, "call_id", "") == "c1" and b.type == "tool_result"]
    assert block.success is False
    # The worker records the timeout itself, so the model and the event log say what happened.
    assert block.output == "tool 'stuck' failed after retries: tool 'stuck' did not finish within 3 s"
    envs = await client.events(task_id)
    [failed] = [e.payload for e in envs if e.type == "ToolCallFailed"]
    assert (failed.call_id, failed.attempt, failed.error_type) == ("c1", 2, "ToolTimeoutError")
    [retried] = [e.payload for e in envs if e.type == "ToolCallRetried"]
    assert (retried.attempt, retried.error_type) == (1, "ToolTimeoutError")


async def test_a_policy_that_returns_no_decision_fails_with_policy_decision_error(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[])
    async with serve(providers=[provider]):
        options = Options(provider=provider, policy=NotADecisionPolicy())
        task_id = await client.start("x", options, task_queue=task_queue)
        with pytest.raises(PolicyDecisionError) as info:
            await client.result(task_id)
    assert isinstance(info.value, PolicyError)  # a bug in the policy, like one that raises
    assert str(info.value) == "policy returned str, which is not a Decision"
    [failed] = [e.payload for e in await client.events(task_id) if e.type == "TaskFailed"]
    assert failed.error_type == "PolicyDecisionError"


async def test_a_tool_failure_without_a_message_is_reported_by_its_type(client: AsyncClient, serve, task_queue):
    @tool(name="mute", version="1", input_schema={"type": "object"}, max_retries=0)
    def mute(arguments, ctx):
        raise ToolRetryableError()

    provider = FakeLLMProvider(responses=[call(("c1", "mute", {})), say("done")])
    async with serve(tools=[mute], providers=[provider]):
        task_id = await client.start("x", Options(provider=provider, allowed_tools=[mute]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    [block] = [b for m in provider.received_requests[1].messages for b in m.content if getattr(b, "call_id", "") == "c1" and b.type == "tool_result"]
    assert block.output == "tool 'mute' failed after retries: ToolRetryableError"
    # The event log shows the model's tool result in the same words (one shared rule).
    [projected] = [b for e in await client.events(task_id) if e.type == "MessagesAppended" and e.actor == "tool:mute"
                   for m in e.payload.messages for b in m.content]
    assert projected.output == block.output
