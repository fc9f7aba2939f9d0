"""Usage limits, enforced by the workflow before the call that would pass them.

Each test runs a real task on the dev server against a scripted provider that reports usage and
records every request it receives, so "the provider never received the request that would pass
the limit" is checked on what the provider actually got.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options, SubAgent
from noeta.errors import BudgetExceededError, ConfigurationError, TaskNotOpenError
from noeta.providers.pricing import ModelPrice, PriceTable
from noeta.protocols.budget import UsageLimits
from noeta.protocols.messages import LLMRequest, ToolResultBlock, Usage
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.policies import ThinkThenDelegate
from tests.support.resources import serving
from tests.support.scripts import call, say
from tests.support.tools import add

# say(): 10 input / 5 output tokens; call(): 10 input / 3 output tokens.


def results_in(request: LLMRequest) -> int:
    return sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResultBlock))


def adder(request: LLMRequest):
    """Asks for one more `add` call after each result, forever: only a limit ends the task."""
    done = results_in(request)
    return call((f"c{done}", "add", {"a": done, "b": 1}))


class Invocations:
    """A tool that counts how often it really ran (on the worker)."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

        @tool(name="lookup", version="1", input_schema={"type": "object"}, description="Look something up.")
        def lookup(arguments: dict, ctx: ToolContext) -> ToolResult:
            with self.lock:
                self.count += 1
            return ToolResult(success=True, output="found")

        self.tool = lookup


async def failed_with_budget(client: AsyncClient, task_id: str) -> BudgetExceededError:
    with pytest.raises(BudgetExceededError) as caught:
        await client.result(task_id)
    return caught.value


async def envelopes(client: AsyncClient, task_id: str, kind: str) -> list:
    return [e.payload for e in await client.events(task_id) if e.type == kind]


async def test_model_call_limit_stops_before_the_next_call(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=adder)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "count",
            Options(provider=provider, allowed_tools=[add], limits=UsageLimits(max_model_calls=3, warn_at=0.5)),
            task_queue=task_queue,
        )
        err = await failed_with_budget(client, task_id)
    assert len(provider.received_requests) == 3  # the fourth request was never sent
    assert (err.limit, err.allowed, err.used) == ("max_model_calls", 3, 3)
    assert "max_model_calls" in str(err)
    assert err.spend["counts"]["model_calls"] == 3 and err.spend["counts"]["tool_calls"] == 3
    assert err.spend["usage"]["uncached"] == 30 and err.spend["usage"]["output"] == 9

    events = await client.events(task_id)
    types = [e.type for e in events]
    assert types[-2:] == ["BudgetExceeded", "TaskFailed"]
    exceeded = events[-2].payload
    assert (exceeded.limit, exceeded.allowed, exceeded.used, exceeded.model_calls) == ("max_model_calls", 3, 3, 3)
    assert exceeded.usage.output == 9
    assert events[-1].payload.error_type == "BudgetExceededError"
    warnings = await envelopes(client, task_id, "BudgetWarning")
    assert [(w.limit, w.used) for w in warnings] == [("max_model_calls", 2)]  # once, at 2 of 3 (>= 0.5)
    assert events[0].payload.limits == UsageLimits(max_model_calls=3, warn_at=0.5)


async def test_output_token_limit_lowers_max_tokens_and_stops_once_reached(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=adder)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "count",
            Options(provider=provider, allowed_tools=[add], max_tokens=100, limits=UsageLimits(max_output_tokens=8)),
            task_queue=task_queue,
        )
        err = await failed_with_budget(client, task_id)
    # 3 output tokens per call: 0, 3, 6 used before calls 1-3; 9 >= 8 before call 4.
    assert [r.max_tokens for r in provider.received_requests] == [8, 5, 2]
    assert (err.limit, err.allowed, err.used) == ("max_output_tokens", 8, 9)


async def test_input_token_limit(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=adder)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "count", Options(provider=provider, allowed_tools=[add], limits=UsageLimits(max_input_tokens=20)),
            task_queue=task_queue,
        )
        err = await failed_with_budget(client, task_id)
    assert len(provider.received_requests) == 2
    assert (err.limit, err.used) == ("max_input_tokens", 20)


async def test_tool_call_limit_refuses_the_round_that_would_pass_it(client: AsyncClient, serve, task_queue):
    lookups = Invocations()

    def two_at_a_time(request: LLMRequest):
        done = results_in(request)
        return call((f"a{done}", "lookup", {}), (f"b{done}", "lookup", {}))

    provider = FakeLLMProvider(responder=two_at_a_time)
    async with serve(tools=[lookups.tool], providers=[provider]):
        task_id = await client.start(
            "look", Options(provider=provider, allowed_tools=[lookups.tool], limits=UsageLimits(max_tool_calls=3)),
            task_queue=task_queue,
        )
        err = await failed_with_budget(client, task_id)
    assert lookups.count == 2  # the second round of two would make 4 > 3: none of it ran
    assert len(provider.received_requests) == 2
    assert (err.limit, err.allowed, err.used) == ("max_tool_calls", 3, 2)
    started = await envelopes(client, task_id, "ToolCallStarted")
    assert len(started) == 2


async def test_per_tool_limit(client: AsyncClient, serve, task_queue):
    lookups = Invocations()

    def alternate(request: LLMRequest):
        done = results_in(request)
        if done % 2 == 0:
            return call((f"l{done}", "lookup", {}))
        return call((f"a{done}", "add", {"a": 1, "b": 2}))

    provider = FakeLLMProvider(responder=alternate)
    limits = UsageLimits(max_tool_calls_per_tool={"lookup": 2})
    async with serve(tools=[lookups.tool, add], providers=[provider]):
        task_id = await client.start(
            "look", Options(provider=provider, allowed_tools=[lookups.tool, add], limits=limits), task_queue=task_queue
        )
        err = await failed_with_budget(client, task_id)
    assert lookups.count == 2
    assert (err.limit, err.allowed, err.used) == ("max_tool_calls_per_tool[lookup]", 2, 2)
    assert err.spend["counts"]["by_tool"] == {"lookup": 2, "add": 2}


async def test_cost_limit_with_the_workers_price_table(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=adder)
    # $100 / $1000 per million tokens: each call (10 in, 3 out) costs $0.004.
    prices = PriceTable({"house-model": ModelPrice(input_per_mtok=100, output_per_mtok=1000)})
    async with serve(tools=[add], providers=[provider]) as registry:
        registry.prices = prices
        task_id = await client.start(
            "count",
            Options(provider=provider, model="house-model", allowed_tools=[add], limits=UsageLimits(max_cost_usd=0.01)),
            task_queue=task_queue,
        )
        err = await failed_with_budget(client, task_id)
    assert len(provider.received_requests) == 3  # $0.008 < $0.01 before the third, $0.012 before the fourth
    assert err.limit == "max_cost_usd" and err.used == pytest.approx(0.012) and err.cost_usd == pytest.approx(0.012)
    completed = await envelopes(client, task_id, "ProviderCallCompleted")
    assert [c.usage.cost_usd for c in completed] == pytest.approx([0.004] * 3)


async def test_cost_limit_needs_a_price_and_fails_before_any_call(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("never")])
    async with serve(providers=[provider]):
        task_id = await client.start(
            "hi", Options(provider=provider, model="unpriced-model", limits=UsageLimits(max_cost_usd=1.0)),
            task_queue=task_queue,
        )
        with pytest.raises(ConfigurationError, match="unpriced-model.*no price"):
            await client.result(task_id)
    assert provider.received_requests == []


async def test_goal_time_limit(client: AsyncClient, serve, task_queue):
    @tool(name="nap", version="1", input_schema={"type": "object"}, description="Sleep 1.5 s.")
    async def nap(arguments: dict, ctx: ToolContext) -> ToolResult:
        await asyncio.sleep(1.5)
        return ToolResult(success=True, output="rested")

    provider = FakeLLMProvider(responder=lambda r: call((f"n{results_in(r)}", "nap", {})))
    async with serve(tools=[nap], providers=[provider]):
        task_id = await client.start(
            "rest", Options(provider=provider, allowed_tools=[nap], limits=UsageLimits(max_goal_seconds=1.0)),
            task_queue=task_queue,
        )
        err = await failed_with_budget(client, task_id)
    assert len(provider.received_requests) == 1  # the tool took 1.5 s > 1 s: no second call
    assert err.limit == "max_goal_seconds" and err.used >= 1.5


async def test_parent_limit_stops_a_sub_agent_and_its_spend_rolls_up(client: AsyncClient, serve, task_queue):
    def script(request: LLMRequest):
        if request.messages[0].text.startswith("sub:"):  # the sub-agent: adds until stopped
            return adder(request)
        return say("let me delegate")

    provider = FakeLLMProvider(responder=script)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "big job",
            Options(provider=provider, policy=ThinkThenDelegate(), allowed_tools=[add],
                    limits=UsageLimits(max_model_calls=3)),
            task_queue=task_queue,
        )
        err = await failed_with_budget(client, task_id)
    # The parent used 1 call; the child got the 2 left and was stopped before its third.
    assert len(provider.received_requests) == 3
    assert [r.messages[0].text for r in provider.received_requests] == ["big job", "sub: big job", "sub: big job"]
    assert (err.limit, err.allowed, err.used) == ("max_model_calls", 3, 3)  # the child's calls rolled up
    assert err.spend["counts"]["tool_calls"] == 2 and err.spend["usage"]["output"] == 5 + 3 + 3
    child = await client.temporal.get_workflow_handle(f"{task_id}/sub/delegate-1").describe()
    assert child.status is not None and child.status.name == "FAILED"
    with pytest.raises(BudgetExceededError) as child_err:
        await client.result(f"{task_id}/sub/delegate-1")
    assert (child_err.value.limit, child_err.value.allowed, child_err.value.used) == ("max_model_calls", 2, 2)


def declared_script(request: LLMRequest):
    """The parent asks its declared `counter` sub-agent once, then answers; the sub-agent adds
    until something stops it."""
    if "/sub/" in request.metadata["task_id"]:
        return adder(request)
    if not results_in(request):
        return call(("k1", "counter", {"goal": "count"}))
    return say("the counter stopped")


async def test_parent_limit_stops_a_declared_sub_agent(client: AsyncClient, task_queue):
    provider = FakeLLMProvider(responder=declared_script)
    counter = SubAgent("counter", "Counts with the add tool.", Options(allowed_tools=[add]))
    options = Options(provider=provider, subagents=[counter], limits=UsageLimits(max_model_calls=3))
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("go", options, task_queue=task_queue)
        err = await failed_with_budget(client, task_id)
    assert len(provider.received_requests) == 3  # 1 parent call, the 2 the sub-agent was given
    assert (err.limit, err.allowed, err.used) == ("max_model_calls", 3, 3)


async def test_a_sub_agents_own_tighter_limit_fails_only_the_sub_agent(client: AsyncClient, task_queue):
    provider = FakeLLMProvider(responder=declared_script)
    counter = SubAgent(
        "counter", "Counts with the add tool.", Options(allowed_tools=[add], limits=UsageLimits(max_model_calls=1))
    )
    options = Options(provider=provider, subagents=[counter], limits=UsageLimits(max_model_calls=10))
    async with serving(client, task_queue, options, provider):
        task_id = await client.start("go", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert result.answer == "the counter stopped"
    # The model was told the sub-agent failed, and its spend was still rolled up.
    told = [b for b in provider.received_requests[-1].messages[-1].content if isinstance(b, ToolResultBlock)]
    assert not told[0].success and "max_model_calls is 1" in (told[0].error or "")
    assert (result.counts.model_calls, result.counts.tool_calls) == (3, 1)
    child = await client.temporal.get_workflow_handle(f"{task_id}/sub/k1").describe()
    assert child.status is not None and child.status.name == "FAILED"


async def test_sub_agent_usage_and_counts_add_to_the_parents(client: AsyncClient, serve, task_queue):
    def script(request: LLMRequest):
        if request.messages[0].text.startswith("sub:"):
            return call(("c0", "add", {"a": 1, "b": 1})) if results_in(request) == 0 else say("2")
        return say("let me delegate")

    provider = FakeLLMProvider(responder=script)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "job", Options(provider=provider, policy=ThinkThenDelegate(), allowed_tools=[add],
                           limits=UsageLimits(max_model_calls=10)),
            task_queue=task_queue,
        )
        result = await client.result(task_id)
    assert result.answer == "child said: 2"
    assert (result.counts.model_calls, result.counts.tool_calls, result.counts.by_tool) == (3, 1, {"add": 1})
    assert result.usage == Usage(uncached=30, output=5 + 3 + 5)


async def test_continue_as_new_keeps_the_running_totals(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=adder)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "count",
            Options(provider=provider, allowed_tools=[add], max_history_events=30,
                    limits=UsageLimits(max_model_calls=8, max_tool_calls=20)),
            task_queue=task_queue,
        )
        err = await failed_with_budget(client, task_id)
    assert len(provider.received_requests) == 8
    assert (err.limit, err.used) == ("max_model_calls", 8)
    assert err.spend["counts"]["tool_calls"] == 8 and err.spend["usage"]["output"] == 24
    runs = await envelopes(client, task_id, "TaskContinuedAsNew")
    assert len(runs) >= 2  # the limit held across runs


async def test_keep_open_task_budget_spans_goals(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[say("one"), say("two")])
    async with serve(providers=[provider]):
        task_id = await client.start(
            "first", Options(provider=provider, limits=UsageLimits(max_model_calls=2)), keep_open=True,
            task_queue=task_queue,
        )
        second = await client.send_goal(task_id, "second")
        assert (second.answer, second.counts.model_calls) == ("two", 2)
        with pytest.raises(BudgetExceededError) as caught:
            await client.send_goal(task_id, "third")
        assert caught.value.limit == "max_model_calls"
        with pytest.raises((BudgetExceededError, TaskNotOpenError)):
            await client.send_goal(task_id, "fourth")
    assert len(provider.received_requests) == 2


def test_limits_are_validated_before_anything_starts():
    with pytest.raises(ConfigurationError, match="max_tool_calls"):
        UsageLimits(max_tool_calls=-1)
    with pytest.raises(ConfigurationError, match="max_cost_usd"):
        UsageLimits(max_cost_usd=0)
    with pytest.raises(ConfigurationError, match="warn_at"):
        UsageLimits(warn_at=1.5)
    with pytest.raises(ConfigurationError, match="max_tool_calls_per_tool"):
        UsageLimits(max_tool_calls_per_tool={"x": 1.5})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="limits"):
        Options(limits={"max_model_calls": 3})  # type: ignore[arg-type]


def test_noeta_run_stops_at_its_tool_call_limit(settings, data_dir, task_queue):
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir),
           "NOETA_TASK_QUEUE": task_queue, "PYTHONPATH": str(root)}
    run = subprocess.run(
        [sys.executable, "-m", "noeta.cli", "run", "what is 20 + 22?", "--registry", "tests.support.registry:cli_registry",
         "--max-tool-calls", "0"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert "noeta: BudgetExceededError: budget exceeded: max_tool_calls is 0" in run.stderr
    assert "[budget] max_tool_calls reached" in run.stderr  # the progress line
    assert run.stdout == ""
