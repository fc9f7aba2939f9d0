"""The decide loop on a real Temporal dev server, with a scripted provider."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import (
    AssistantMessage,
    Result,
    ToolResultView,
    ToolUse,
    UserMessage,
)
from noeta.client.options import Options
from noeta.errors import ConfigurationError, ProviderError
from noeta.protocols.messages import ToolResultBlock
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.policies import DelegatingPolicy, EchoTwicePolicy
from tests.support.scripts import call, say
from tests.support.tools import add, boom


def tool_results(request) -> list[ToolResultBlock]:
    return [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


async def test_tool_loop_appends_results_and_finishes(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "add", {"a": 2, "b": 3})), say("the sum is 5")])
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "add 2 and 3", Options(provider=provider, allowed_tools=[add], system_prompt="Use tools."), task_queue=task_queue
        )
        result = await client.result(task_id)
    assert (result.status, result.answer, result.turns) == ("completed", "the sum is 5", 2)
    assert result.usage.output == 8
    first, second = provider.received_requests
    assert first.system == "Use tools."
    assert [t["name"] for t in first.tools] == ["add"]
    assert [(b.call_id, b.output, b.success) for b in tool_results(second)] == [("c1", "5", True)]
    assert await client.messages(task_id) == [
        UserMessage("add 2 and 3"),
        ToolUse("c1", "add", {"a": 2, "b": 3}),
        ToolResultView("c1", "add", True, "5"),
        AssistantMessage("the sum is 5"),
        Result("the sum is 5", "completed"),
    ]


async def test_tool_calls_of_one_turn_run_in_parallel(client: AsyncClient, serve, task_queue):
    # Each call waits for the other to have started: run one after the other, they would time out.
    barrier = threading.Barrier(2, timeout=20)

    @tool(name="meet", version="1", input_schema={"type": "object"}, description="Wait for a partner.")
    def meet(arguments, ctx):
        barrier.wait()
        return ToolResult(success=True, output=f"met {ctx.call_id}")

    provider = FakeLLMProvider(responses=[call(("a", "meet", {}), ("b", "meet", {})), say("done")])
    async with serve(tools=[meet], providers=[provider]):
        task_id = await client.start("meet", Options(provider=provider, allowed_tools=[meet]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    assert [(b.call_id, b.output) for b in tool_results(provider.received_requests[1])] == [
        ("a", "met a"),
        ("b", "met b"),
    ]


@pytest.mark.parametrize(
    ("call_args", "expected"),
    [
        (("x", "no_such_tool", {}), "Unknown tool 'no_such_tool'. Available tools: add, boom."),
        (("x", "add", {"a": "two", "b": 3}), "Arguments for tool 'add' do not match its input_schema: 'two' is not of type 'number' (at a)"),
        (("x", "add", {"a": 1}), "Arguments for tool 'add' do not match its input_schema: 'b' is a required property"),
        (("x", "boom", {}), "RuntimeError: the boom tool exploded"),
    ],
    ids=["unknown-tool", "wrong-type", "missing-argument", "tool-raises"],
)
async def test_bad_tool_calls_go_back_to_the_model(client: AsyncClient, serve, task_queue, call_args, expected):
    provider = FakeLLMProvider(responses=[call(call_args), say("recovered")])
    async with serve(tools=[add, boom], providers=[provider]):
        # validate_tool_input: the task opts in to checking arguments against input_schema.
        options = Options(provider=provider, allowed_tools=[add, boom], validate_tool_input=True)
        task_id = await client.start("go", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "recovered")
    [block] = tool_results(provider.received_requests[1])
    assert (block.success, block.output) == (False, expected)


@tool(
    name="echo_args",
    version="1",
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    description="Echo the arguments.",
)
def echo_args(arguments, ctx):
    return ToolResult(success=True, output=json.dumps(arguments, sort_keys=True))


strict_echo = tool(echo_args.fn, name="strict_echo", version="1", input_schema=echo_args.input_schema, validate_input=True)


async def test_input_schema_is_metadata_not_a_runtime_validator(client: AsyncClient, serve, task_queue):
    """The seed: input_schema is for the model. Arguments that do not match still reach the tool
    unless the tool (``@tool(validate_input=True)``) or the task (``validate_tool_input``) opts in."""
    provider = FakeLLMProvider(
        responses=[call(("a", "echo_args", {"n": "seven"}), ("b", "strict_echo", {"n": "seven"})), say("done")]
    )
    async with serve(tools=[echo_args, strict_echo], providers=[provider]):
        options = Options(provider=provider, allowed_tools=[echo_args, strict_echo])
        task_id = await client.start("go", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    loose, strict = tool_results(provider.received_requests[1])
    assert (loose.success, loose.output) == (True, '{"n": "seven"}')
    assert (strict.success, strict.output) == (
        False, "Arguments for tool 'strict_echo' do not match its input_schema: 'seven' is not of type 'integer' (at n)"
    )


async def test_max_turns_ends_the_run_as_failed_with_a_reason(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=lambda request: call((f"c{len(request.messages)}", "add", {"a": 1, "b": 1})))
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "loop forever", Options(provider=provider, allowed_tools=[add], max_turns=3), task_queue=task_queue
        )
        result = await client.result(task_id)
    assert result.status == "failed"
    assert result.answer == "max_turns (3) reached before the task finished"
    assert len(provider.received_requests) == 3
    assert (await client.messages(task_id))[-1] == Result(result.answer, "failed")


async def test_custom_policy_runs_inside_the_workflow(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("one"), say("two"), say("three")])
    async with serve(providers=[provider]):
        task_id = await client.start(
            "count", Options(provider=provider, policy=EchoTwicePolicy(times=3, sep="+")), task_queue=task_queue
        )
        result = await client.result(task_id)
    assert result.answer == "one+two+three"


async def test_spawned_subtask_is_a_child_workflow_with_rolled_up_usage(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("child answer", output_tokens=7)])
    async with serve(providers=[provider]):
        task_id = await client.start(
            "delegate me", Options(provider=provider, policy=DelegatingPolicy()), task_queue=task_queue
        )
        result = await client.result(task_id)
    assert result.answer == "child said: child answer"
    assert result.usage.output == 7
    assert provider.received_requests[0].messages[0].text == "sub: delegate me"
    child = await client.temporal.get_workflow_handle(f"{task_id}/sub/delegate-1").describe()
    assert child.parent_id == task_id
    types = [e.type for e in await client.events(task_id)]
    assert types.index("SubtaskSpawned") < types.index("SubtaskCompleted")


async def test_policy_defined_in_a_function_is_rejected_before_start(client: AsyncClient):
    class LocalPolicy:
        def decide(self, ctx, view):  # pragma: no cover - never runs
            raise AssertionError

    with pytest.raises(ConfigurationError, match="module level"):
        await client.start("x", Options(policy=LocalPolicy()))


async def test_multi_turn_session_with_send_goal(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("first"), say("second")])
    async with serve(providers=[provider]):
        task_id = await client.start("goal one", Options(provider=provider), keep_open=True, task_queue=task_queue)
        second = await client.send_goal(task_id, "goal two")
        assert (second.answer, second.goal_index) == ("second", 1)
        await client.close_task(task_id)
        final = await client.result(task_id)
    assert final.answer == "second"
    assert [m.text for m in provider.received_requests[1].messages] == ["goal one", "first", "goal two"]
    items = await client.messages(task_id)
    assert items == [
        UserMessage("goal one"),
        AssistantMessage("first"),
        Result("first", "completed"),
        UserMessage("goal two"),
        AssistantMessage("second"),
        Result("second", "completed"),
    ]


async def test_results_of_a_round_are_projected_in_call_order_whatever_finishes_first(client: AsyncClient, serve, task_queue):
    from tests.support.waiting import eventually

    release = threading.Event()

    @tool(name="slow", version="1", input_schema={"type": "object"})
    def slow(arguments, ctx):
        assert release.wait(20)  # released once "fast" has completed
        return ToolResult(success=True, output="slow result")

    @tool(name="fast", version="1", input_schema={"type": "object"})
    def fast(arguments, ctx):
        return ToolResult(success=True, output="fast result")

    async def fast_completed() -> bool:
        return any(e.type == "ToolCallCompleted" for e in await client.events(task_id))

    provider = FakeLLMProvider(responses=[call(("a", "slow", {}), ("b", "fast", {})), say("both")])
    async with serve(tools=[slow, fast], providers=[provider]):
        task_id = await client.start("go", Options(provider=provider, allowed_tools=[slow, fast]), task_queue=task_queue)
        await eventually(fast_completed)
        release.set()
        await client.result(task_id)
    seen_by_model = [b.call_id for b in tool_results(provider.received_requests[1])]
    completed = [e.payload.call_id for e in await client.events(task_id) if e.type == "ToolCallCompleted"]
    projected = [i.call_id for i in await client.messages(task_id) if isinstance(i, ToolResultView)]
    assert completed == ["b", "a"] and seen_by_model == projected == ["a", "b"]


async def test_cancelling_while_a_subtask_runs_cancels_the_task(client: AsyncClient, serve, task_queue):
    from noeta.errors import TaskCancelledError

    started = threading.Event()

    def responder(request):
        started.set()
        raise ProviderError(provider="slow", message="busy", status=503, retryable=True)

    provider = FakeLLMProvider(responder=responder)
    async with serve(providers=[provider]):
        task_id = await client.start(
            "delegate", Options(provider=provider, policy=DelegatingPolicy(), max_retries=10), task_queue=task_queue
        )
        await asyncio.to_thread(started.wait, 20)
        await client.cancel(task_id)
        with pytest.raises(TaskCancelledError):
            await client.result(task_id)
    assert (await client.events(task_id))[-1].type == "TaskCancelled"


def test_llm_policy_answers_a_call_id_that_repeats_across_turns():
    from noeta.builtins.llm_policy import LLMPolicy
    from noeta.protocols.decisions import CallTools
    from noeta.protocols.messages import Message, TextBlock, ToolUseBlock, Usage
    from noeta.protocols.step_context import StepContext
    from noeta.protocols.view import View

    use = ToolUseBlock("call_0", "add", {"a": 1, "b": 1})
    transcript = (
        Message("user", [TextBlock("go")]),
        Message("assistant", [use]),
        Message("tool", [ToolResultBlock("call_0", "2", True)]),
        Message("assistant", [use]),  # a server that reuses ids
    )
    ctx = StepContext(task_id="t", trace_id="t", model=None, tools=[], max_turns=5)
    decision = LLMPolicy().decide(ctx, View(transcript=transcript, usage=Usage(), turn=2, budget=3))
    assert decision == CallTools(calls=[use])
