"""Sub-agents the model can call: declared in Options, offered to the model as tools by the default
LLM policy, run as child tasks with their own options (tools, prompt, policy, output schema)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from pydantic import BaseModel

from noeta.builtins.llm_policy import LLMPolicy
from noeta.client.client import AsyncClient
from noeta.errors import ConfigurationError, ProviderError, TaskCancelledError
from noeta.sdk import (
    CallModel,
    CallTools,
    Message,
    Options,
    SpawnSubtask,
    StepContext,
    SubAgent,
    TextBlock,
    ToolResult,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    View,
    tool,
)
from noeta.sdk.testing import FakeLLMProvider
from tests.support.policies import EchoTwicePolicy
from tests.support.resources import serving
from tests.support.scripts import call, say
from tests.support.waiting import eventually

NO_ARGS = {"type": "object"}


class Report(BaseModel):
    topic: str
    findings: list[str]


@tool(name="search", version="1", input_schema={"type": "object", "properties": {"q": {"type": "string"}}})
def search(arguments, ctx):
    return ToolResult(success=True, output=f"results for {arguments.get('q')}")


@tool(name="clock", version="1", input_schema=NO_ARGS)
def clock(arguments, ctx):
    return ToolResult(success=True, output="12:00")


def child_of(request) -> bool:
    return "/sub/" in request.metadata["task_id"]


def results(request) -> list[ToolResultBlock]:
    return [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


researcher = SubAgent(
    "researcher",
    "Researches a topic and reports findings as JSON.",
    Options(system_prompt="You research.", allowed_tools=[search], output_schema=Report),
)


async def test_the_model_calls_a_declared_sub_agent_and_gets_its_typed_result(client: AsyncClient, task_queue):
    report = {"topic": "tides", "findings": ["the moon", "the sun"]}

    def responder(request):
        if child_of(request):
            if not results(request):
                return call(("s1", "search", {"q": "tides"}))
            return say(json.dumps(report), output_tokens=11)
        if not results(request):
            return call(("r1", "researcher", {"goal": "Research tides"}))
        return say("Tides come from " + " and ".join(json.loads(results(request)[0].output)["findings"]))

    provider = FakeLLMProvider(responder=responder)
    options = Options(provider=provider, subagents=[researcher])
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("Why are there tides?", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert result.answer == "Tides come from the moon and the sun"

    parent_first, child_first, child_second, parent_second = provider.received_requests
    offered = {t["name"]: t for t in parent_first.tools}
    assert offered["researcher"]["description"] == researcher.description
    assert offered["researcher"]["input_schema"]["required"] == ["goal"]
    assert (child_first.system, [t["name"] for t in child_first.tools]) == ("You research.", ["search"])
    assert child_first.messages[0].text == "Research tides"
    assert json.loads(results(parent_second)[0].output) == report  # the child's validated data

    child_id = f"{task_id}/sub/r1"
    assert (await client.temporal.get_workflow_handle(child_id).describe()).parent_id == task_id
    events = await client.events(task_id)
    spawned = next(e.payload for e in events if e.type == "SubtaskSpawned")
    completed = next(e.payload for e in events if e.type == "SubtaskCompleted")
    assert (spawned.agent, spawned.goal, spawned.child_task_id) == ("researcher", "Research tides", child_id)
    assert completed.success and completed.data == report
    # Usage rolls up: the parent's total includes its child's two calls.
    assert completed.usage == Usage(uncached=20, output=3 + 11)
    assert result.usage == Usage(uncached=40, output=3 + 5 + 3 + 11)
    # The parent's projection shows the child's answer where the model saw it.
    tool_results = [b for e in events if e.type == "MessagesAppended" for m in e.payload.messages for b in m.content
                    if isinstance(b, ToolResultBlock)]
    assert [json.loads(b.output) for b in tool_results] == [report]


async def test_a_sub_agent_runs_its_own_policy(client: AsyncClient, task_queue):
    def responder(request):
        if child_of(request):
            return say("one" if len(request.messages) == 1 else "two")
        return say(f"child said {results(request)[0].output}") if results(request) else call(("e", "echo", {"goal": "count"}))

    provider = FakeLLMProvider(responder=responder)
    echo = SubAgent("echo", "Answers twice.", Options(policy=EchoTwicePolicy(times=2, sep="+")))
    options = Options(provider=provider, subagents=[echo])
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("go", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "child said one+two"


async def test_tools_of_a_turn_run_before_its_sub_agent_calls_and_bad_calls_go_back_to_the_model(
    client: AsyncClient, task_queue
):
    def responder(request):
        if child_of(request):
            return say("researched")
        if not results(request):
            return call(("r0", "helper", {"topic": "no goal"}), ("c1", "clock", {}), ("r1", "helper", {"goal": "go"}))
        return say("done")

    provider = FakeLLMProvider(responder=responder)
    options = Options(provider=provider, allowed_tools=[clock], subagents=[SubAgent("helper", "Helps.")])
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("mixed", options, task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    last = provider.received_requests[-1]
    by_call = {b.call_id: b for b in results(last)}
    assert [b.call_id for b in results(last)] == ["c1", "r0", "r1"]  # the tool first, then the sub-agents in order
    assert by_call["c1"].output == "12:00"
    assert not by_call["r0"].success and "needs a non-empty 'goal'" in by_call["r0"].error
    assert (by_call["r1"].success, by_call["r1"].output) == (True, "researched")
    spawned = [e.payload.call_id for e in await client.events(task_id) if e.type == "SubtaskSpawned"]
    assert spawned == ["r1"]  # the bad call started no child


async def test_cancelling_the_parent_cancels_the_sub_agent_it_waits_for(client: AsyncClient, task_queue):
    child_asked = threading.Event()

    def responder(request):
        if child_of(request):
            child_asked.set()
            raise ProviderError(provider="fake", message="busy", status=503, retryable=True)
        return call(("r1", "slow", {"goal": "take your time"}))

    provider = FakeLLMProvider(responder=responder)
    options = Options(provider=provider, subagents=[SubAgent("slow", "Takes long.", Options(max_retries=20))])
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("go", options, task_queue=task_queue)
        assert await asyncio.to_thread(child_asked.wait, 30)
        await client.cancel(task_id)
        with pytest.raises(TaskCancelledError):
            await client.result(task_id)
        child = client.temporal.get_workflow_handle(f"{task_id}/sub/r1")

        async def child_cancelled() -> bool:
            return (await child.describe()).status.name == "CANCELED"

        await eventually(child_cancelled)


def test_the_llm_policy_spawns_declared_sub_agents_after_the_turns_tools():
    ctx = StepContext(task_id="t", trace_id="t", model=None, tools=[], max_turns=5, subagents=("researcher",))
    agent_call = ToolUseBlock("r1", "researcher", {"goal": "dig"})
    tool_call = ToolUseBlock("c1", "clock", {})
    turn = Message("assistant", [agent_call, tool_call])
    view = lambda *messages: View(transcript=(Message("user", [TextBlock("go")]), *messages), usage=Usage(), turn=1, budget=4)  # noqa: E731
    policy = LLMPolicy()
    assert policy.decide(ctx, view(turn)) == CallTools(calls=[tool_call])
    after_tools = Message("tool", [ToolResultBlock("c1", "12:00", True)])
    assert policy.decide(ctx, view(turn, after_tools)) == SpawnSubtask(goal="dig", call_id="r1", agent="researcher")
    after_agent = Message("tool", [ToolResultBlock("r1", "found", True)])
    assert policy.decide(ctx, view(turn, after_tools, after_agent)) == CallModel()


def test_sub_agent_declarations_are_checked_when_made():
    with pytest.raises(ConfigurationError, match="letters, digits"):
        SubAgent("has space", "x")
    with pytest.raises(ConfigurationError, match="needs a description"):
        SubAgent("ok", " ")
    with pytest.raises(ConfigurationError, match="already a tool or sub-agent"):
        Options(allowed_tools=[clock], subagents=[SubAgent("clock", "Shadows a tool.")])
    with pytest.raises(ConfigurationError, match="already a tool or sub-agent"):
        Options(subagents=[SubAgent("a", "One."), SubAgent("a", "Two.")])
    with pytest.raises(ConfigurationError, match="not a SubAgent"):
        Options(subagents=["researcher"])  # type: ignore[list-item]
