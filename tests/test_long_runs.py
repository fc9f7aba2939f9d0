"""Continue-as-new keeps a task going in fresh runs; injected context enters between steps."""

from __future__ import annotations

import threading

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import InjectedMessage, ToolResultView, UserMessage
from noeta.client.options import Options
from noeta.protocols.messages import ToolResultBlock
from noeta.protocols.tool import ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.scripts import call, say
from tests.support.tools import add
from tests.support.waiting import eventually

STEPS = 12


def counting(request):
    done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResultBlock))
    return call((f"c{done}", "add", {"a": done, "b": 1})) if done < STEPS else say(f"counted to {done}")


async def test_continue_as_new_mid_goal_keeps_transcript_seq_and_usage(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=counting)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "count", Options(provider=provider, allowed_tools=[add], max_history_events=40), task_queue=task_queue
        )
        result = await client.result(task_id)
    assert (result.status, result.answer, result.turns) == ("completed", "counted to 12", STEPS + 1)
    assert result.usage.output == STEPS * 3 + 5

    envs = await client.events(task_id)
    assert [e.seq for e in envs] == list(range(1, len(envs) + 1))
    runs = sum(1 for e in envs if e.type == "TaskContinuedAsNew")
    assert runs >= 2
    assert len({e.trace_id for e in envs}) == 1
    assert [e.type for e in envs].count("TaskCreated") == 1
    last = provider.received_requests[-1]  # the provider still sees the whole conversation
    assert [b.output for m in last.messages for b in m.content if isinstance(b, ToolResultBlock)] == [
        str(i + 1) for i in range(STEPS)
    ]
    items = await client.messages(task_id)
    assert [i.output for i in items if isinstance(i, ToolResultView)] == [str(i + 1) for i in range(STEPS)]
    assert items[0] == UserMessage("count")
    history = await client.history(task_id)
    assert max(e.event_id for e in history) < 60  # each run stays small


async def test_idle_keep_open_task_continues_as_new_and_takes_the_next_goal(client: AsyncClient, serve, task_queue):
    # While idle the workflow wakes only for new events: signals (injected context) grow the history
    # until the run moves on, carrying the injections into the next goal of the next run.
    provider = FakeLLMProvider(responses=[say("one"), say("two")])
    async with serve(providers=[provider]):
        task_id = await client.start(
            "first", Options(provider=provider, max_history_events=20), keep_open=True, task_queue=task_queue
        )
        await eventually(lambda: goal_done(client, task_id))
        injected = 0
        while not await moved_on(client, task_id):
            assert injected < 10, "the idle run never continued as new"
            injected += 1
            await client.inject(task_id, f"note {injected}")
            await eventually(lambda count=injected: history_grew(client, task_id, count))
        second = await client.send_goal(task_id, "second")
        await client.close_task(task_id)
        final = await client.result(task_id)
    assert (second.answer, final.answer, final.turns) == ("two", "two", 1)
    texts = [m.text for m in provider.received_requests[1].messages]
    assert texts == ["first", "one", "second", *[f"note {n}" for n in range(1, injected + 1)]]


async def goal_done(client: AsyncClient, task_id: str) -> bool:
    return any(e.type == "TaskCompleted" for e in await client.events(task_id))


async def moved_on(client: AsyncClient, task_id: str) -> bool:
    return any(e.type == "TaskContinuedAsNew" for e in await client.events(task_id))


async def history_grew(client: AsyncClient, task_id: str, signals: int) -> bool:
    history = await client.history(task_id)
    return sum(1 for e in history if e.HasField("workflow_execution_signaled_event_attributes")) >= signals


async def test_injected_context_arrives_between_steps_as_injected_message(client: AsyncClient, serve, task_queue):
    started, release = threading.Event(), threading.Event()

    @tool(name="slow", version="1", input_schema={"type": "object"})
    def slow(arguments, ctx):
        started.set()
        assert release.wait(30)
        return ToolResult(success=True, output="slow done")

    provider = FakeLLMProvider(responses=[call(("c1", "slow", {})), say("noted")])
    async with serve(tools=[slow], providers=[provider]):
        task_id = await client.start("work", Options(provider=provider, allowed_tools=[slow]), task_queue=task_queue)
        await eventually(started.is_set)
        await client.inject(task_id, "Reminder: the customer is on the VIP plan.", origin="memory")
        release.set()
        assert (await client.result(task_id)).answer == "noted"
    second = provider.received_requests[1].messages
    assert [(m.role, m.origin) for m in second[-2:]] == [("tool", None), ("user", "memory")]
    assert second[-1].text == "Reminder: the customer is on the VIP plan."
    items = await client.messages(task_id)
    assert InjectedMessage("Reminder: the customer is on the VIP plan.", "memory") in items
    assert not any(isinstance(i, UserMessage) and "VIP" in i.text for i in items)
    kinds = [type(i).__name__ for i in items]
    assert kinds.index("ToolResultView") < kinds.index("InjectedMessage")


async def test_injections_are_bounded_per_step(client: AsyncClient, serve, task_queue):
    from noeta.errors import PayloadTooLargeError
    from noeta.protocols.task import (
        MAX_INJECTED_CHARS_PER_STEP,
        MAX_INJECTION_CHARS,
        InjectInput,
    )

    with pytest.raises(PayloadTooLargeError):
        await client.inject("any-task", "x" * (MAX_INJECTION_CHARS + 1))
    started, release = threading.Event(), threading.Event()

    @tool(name="hold", version="1", input_schema={"type": "object"})
    def hold(arguments, ctx):
        started.set()
        assert release.wait(30)
        return ToolResult(success=True, output="held")

    provider = FakeLLMProvider(
        responses=[call(("c1", "hold", {})), call(("c2", "hold", {})), say("noted"), say("done")]
    )
    async with serve(tools=[hold], providers=[provider]):
        task_id = await client.start("work", Options(provider=provider, allowed_tools=[hold]), task_queue=task_queue)
        await eventually(started.is_set)
        # Raw signals bypass the client's check: the workflow bounds what enters at one step.
        handle = client.temporal.get_workflow_handle(task_id)
        for text in ("a" * MAX_INJECTION_CHARS, "b" * MAX_INJECTION_CHARS, "c" * MAX_INJECTION_CHARS,
                     "d" * MAX_INJECTION_CHARS, "e" * MAX_INJECTION_CHARS, "f" * (MAX_INJECTED_CHARS_PER_STEP + 10)):
            await handle.signal("inject", InjectInput(text))
        release.set()
        assert (await client.result(task_id)).answer == "noted"
    _, second, third = provider.received_requests
    injected = [[m.text for m in r.messages if m.origin == "system"] for r in (second, third)]
    assert [t[0] for t in injected[0]] == ["a", "b", "c", "d"]  # 4 × 64 KiB fill one step's 256 KiB
    # "e" takes the next step; "f" arrived with 320 KiB already queued: over the 512 KiB queue bound,
    # so its text was replaced by a note when the signal came in.
    assert [t[:1] for t in injected[1][4:]] == ["e", "["]
    assert injected[1][-1] == (
        f"[{MAX_INJECTED_CHARS_PER_STEP + 10} characters of injected context dropped: too much was waiting]"
    )


async def test_close_survives_continue_as_new_and_oversized_goals_are_refused(client: AsyncClient, serve, task_queue):
    from temporalio.client import WorkflowUpdateFailedError

    from noeta.errors import PayloadTooLargeError
    from noeta.protocols.task import MAX_GOAL_BYTES, GoalInput

    provider = FakeLLMProvider(responder=counting)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "count", Options(provider=provider, allowed_tools=[add], max_history_events=40),
            keep_open=True, task_queue=task_queue,
        )
        with pytest.raises(PayloadTooLargeError):
            await client.send_goal(task_id, "x" * (MAX_GOAL_BYTES + 1))
        # Past the client's check, the workflow's validator refuses it too: nothing enters history.
        handle = client.temporal.get_workflow_handle(task_id)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("send_goal", GoalInput("y" * (MAX_GOAL_BYTES + 1)))
        assert (refused.value.cause.type, refused.value.cause.message) == (
            "PayloadTooLargeError", f"goal is over {MAX_GOAL_BYTES} bytes"
        )
        await client.close_task(task_id)  # sent during the first goal, which continues as new mid-way
        result = await client.result(task_id)
    assert result.answer == "counted to 12"
    assert sum(1 for e in await client.events(task_id) if e.type == "TaskContinuedAsNew") >= 2


def counting_goal(request):
    """Answers the first goal at once; the goal "count" takes 12 tool rounds."""
    human = [i for i, m in enumerate(request.messages) if m.role == "user" and m.origin == "human"]
    last = human[-1]
    if request.messages[last].text != "count":
        return say("one")
    done = sum(1 for m in request.messages[last:] for b in m.content if isinstance(b, ToolResultBlock))
    return call((f"k{done}", "add", {"a": done, "b": 1})) if done < STEPS else say(f"counted to {done}")


async def test_a_goal_sent_with_send_goal_continues_as_new_and_its_caller_follows(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=counting_goal)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "first", Options(provider=provider, allowed_tools=[add], max_history_events=40),
            keep_open=True, task_queue=task_queue,
        )
        result = await client.send_goal(task_id, "count")  # runs across several runs
        await client.close_task(task_id)
        final = await client.result(task_id)
    assert (result.answer, result.goal_index, final.answer) == ("counted to 12", 1, "counted to 12")
    envs = await client.events(task_id)
    assert sum(1 for e in envs if e.type == "TaskContinuedAsNew") >= 2
    assert [e.type for e in envs].count("GoalReceived") == 1  # followed, not sent twice
    assert [i.output for i in await client.messages(task_id) if isinstance(i, ToolResultView)] == [
        str(i + 1) for i in range(STEPS)
    ]
    history = await client.history(task_id)
    assert max(e.event_id for e in history) < 60  # no run grew past the limit by much
