"""Forking a task from one of its model turns, on a real dev server with real workers: the fork
starts from the source's recorded transcript (no tool call before the fork point runs again),
decides that turn anew under its own settings, and leaves the source as it was."""

from __future__ import annotations

import dataclasses

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.client.wire import envelope_to_dict
from noeta.errors import ConfigurationError, TaskNotFoundError, TurnNotFoundError
from noeta.protocols.event_log import TaskForked
from noeta.protocols.messages import LLMRequest, LLMResponse, ToolResultBlock
from noeta.sdk.testing import FakeLLMProvider, load_task
from noeta.temporal.search_attributes import FORKED_FROM
from tests.support import recorded
from tests.support.recorded import count, results_in
from tests.support.replay import replay as replay_history
from tests.support.scripts import call, say
from tests.test_export_replay import run_counting_task


def fixed_rest(request: LLMRequest) -> LLMResponse:
    """Another provider: with two recorded counts it counts to 30 once, then answers."""
    return call(("n1", "count", {"n": 30})) if results_in(request) == 2 else say("the other provider's answer")


def outputs(request: LLMRequest) -> list[str]:
    return [str(b.output) for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


async def test_fork_at_turn_3_with_another_provider(client: AsyncClient, serve, task_queue):
    source = await run_counting_task(client, serve, task_queue)
    before = [envelope_to_dict(e) for e in await client.events(source)]
    runs_before = list(recorded.RUNS)
    other = FakeLLMProvider(responder=fixed_rest)
    async with serve(tools=[count], providers={"other": other}):
        fork = await client.fork(source, at_turn=3, options=Options(provider="other"), task_queue=task_queue)
        result = await client.result(fork)
    assert (result.status, result.answer) == ("completed", "the other provider's answer")
    # Only the fork's own tool call ran: the first two counts came from the record.
    new_runs = recorded.RUNS[len(runs_before):]
    assert len(new_runs) == 1 and new_runs[0].startswith(fork)
    first = other.received_requests[0]
    assert outputs(first) == ["counted 1", "counted 2"]
    assert first.system == "Count carefully."  # unspecified settings come from the source
    assert [t["name"] for t in first.tools] == ["count"]
    assert outputs(other.received_requests[1]) == ["counted 1", "counted 2", "counted 30"]
    # The source is unchanged, event for event.
    assert [envelope_to_dict(e) for e in await client.events(source)] == before
    # The fork's log starts with TaskForked, and its turns go on from the source's numbering.
    events = await client.events(fork)
    assert events[0].type == "TaskForked" and events[0].payload == TaskForked(source_task_id=source, turn=3)
    assert events[1].type == "TaskCreated" and events[1].causation_id == events[0].seq
    assert [e.payload.turn for e in events if e.type == "ProviderCallStarted"] == [3, 4]
    assert "counted 2" in repr([e.payload for e in events if e.type == "MessagesAppended"][0])
    assert result.turns == 4  # the goal's model calls: two from the record, two of the fork's
    described = await client.temporal.get_workflow_handle(fork).describe()
    assert described.typed_search_attributes.get(FORKED_FROM) == source
    # The fork's history replays deterministically with today's workflow code.
    assert await replay_history(load_task(await client.export(fork)).histories()[0]) is None


async def test_fork_with_a_new_goal_and_changed_prompt(client: AsyncClient, serve, task_queue):
    source = await run_counting_task(client, serve, task_queue)
    runs_before = len(recorded.RUNS)
    other = FakeLLMProvider(responses=[say("stopped at one")])
    async with serve(tools=[count], providers={"other": other}):
        fork = await client.fork(
            source, at_turn=2, goal="Stop counting now.",
            options=Options(provider="other", system_prompt="Be brief.", model="m-2"), task_queue=task_queue,
        )
        assert (await client.result(fork)).answer == "stopped at one"
    (request,) = other.received_requests
    assert (request.system, request.model) == ("Be brief.", "m-2")
    assert request.messages[-1].content[0].text == "Stop counting now."
    assert outputs(request) == ["counted 1"]
    assert len(recorded.RUNS) == runs_before
    created = [e.payload for e in await client.events(fork) if e.type == "TaskCreated"][0]
    assert created.goal == "Stop counting now."


async def test_forking_a_turn_that_does_not_exist_names_the_valid_range(client: AsyncClient, serve, task_queue):
    source = await run_counting_task(client, serve, task_queue)
    for turn in (0, 5, -1):
        with pytest.raises(TurnNotFoundError, match=r"has no turn .*: its recorded turns are 1\.\.4") as caught:
            await client.fork(source, at_turn=turn, task_id=f"{source}-fork-{turn}", task_queue=task_queue)
        assert caught.value.valid == range(1, 5)
        with pytest.raises(TaskNotFoundError):  # nothing was started
            await client.describe(f"{source}-fork-{turn}")
    with pytest.raises(TaskNotFoundError):
        await client.fork("no-such-task-to-fork", at_turn=1)
    with pytest.raises(ConfigurationError, match="task_id must not be empty"):  # as start() refuses it
        await client.fork(source, at_turn=2, task_id="", task_queue=task_queue)


async def test_fork_of_a_task_that_continued_as_new(client: AsyncClient, serve, task_queue):
    from tests.support.tools import add
    from tests.test_long_runs import STEPS, counting

    provider = FakeLLMProvider(responder=counting)
    async with serve(tools=[add], providers=[provider]):
        source = await client.start(
            "count", Options(provider=provider, allowed_tools=[add], max_history_events=40), task_queue=task_queue
        )
        answer = (await client.result(source)).answer
        export_runs = len([e for e in await client.events(source) if e.type == "TaskContinuedAsNew"])
        assert export_runs >= 1
        sent = len(provider.received_requests)
        # A late turn, recorded in a later run: the fork rebuilds the whole transcript from there.
        fork = await client.fork(source, at_turn=STEPS, task_queue=task_queue)
        assert (await client.result(fork)).answer == answer
    forked = provider.received_requests[sent:]
    assert len(forked) == 2  # turns STEPS and STEPS + 1: one tool call, then the answer
    recorded_request = provider.received_requests[STEPS - 1]
    assert dataclasses.replace(forked[0], metadata={}, timeout_seconds=None) == dataclasses.replace(
        recorded_request, metadata={}, timeout_seconds=None
    )


async def test_fork_of_an_encrypted_task(settings, tmp_path, task_queue: str):
    from noeta.security.keys import new_key_entry
    from tests.test_encryption import OUTPUT, ledger_lookup, ring, run_task

    from noeta.activities.registry import Registry
    from noeta.worker import build_worker

    keys = ring(new_key_entry("v1"))
    source, secure = await run_task(settings, tmp_path / "content", keys, task_queue)
    other = FakeLLMProvider(responses=[say("forked and encrypted")])
    registry = Registry.of(tools=[ledger_lookup], providers={"other": other}, content_store=secure.content_store)
    async with build_worker(secure.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
        fork = await secure.fork(source, at_turn=2, options=Options(provider="other"), task_queue=task_queue)
        assert (await secure.result(fork)).answer == "forked and encrypted"
    # The tool's stored output (ciphertext in the store) reached the fork's model in the clear.
    assert any(OUTPUT in text for text in outputs(other.received_requests[0]))
    assert [e.type for e in await secure.events(fork)][:2] == ["TaskForked", "TaskCreated"]


async def test_fork_of_a_task_waiting_for_approval(client: AsyncClient, serve, task_queue):
    from tests.test_guards import AmountGuard, runs, wire_money

    runs.clear()
    provider = FakeLLMProvider(
        responses=[call(("w1", "wire_money", {"amount": 500})), call(("w2", "wire_money", {"amount": 5000}))]
    )
    other = FakeLLMProvider(responses=[say("no second wire")])
    options = Options(provider=provider, allowed_tools=[wire_money], guards=[AmountGuard()])
    async with serve(tools=[wire_money], providers={"FakeLLMProvider": provider, "other": other}, guards=[AmountGuard()]):
        source = await client.start("pay twice", options, task_queue=task_queue)
        from tests.support.waiting import eventually

        await eventually(lambda: client.pending_approvals(source))
        fork = await client.fork(source, at_turn=2, options=Options(provider="other"), task_queue=task_queue)
        assert (await client.result(fork)).answer == "no second wire"
        assert outputs(other.received_requests[0]) == ["wired 500"]
        assert runs == [{"amount": 500}]  # the source's first wire, not run again
        # The source still waits for its human.
        assert [r.call_id for r in await client.pending_approvals(source)] == ["w2"]
        assert (await client.describe(source)).status == "awaiting_approval"
        await client.cancel(source)


async def test_fork_after_a_finished_sub_agent_takes_its_result_from_the_record(client: AsyncClient, task_queue):
    import json

    from tests.support.resources import serving
    from tests.test_subagents import child_of, researcher

    report = {"topic": "tides", "findings": ["the moon", "the sun"]}

    def responder(request):
        if child_of(request):
            return call(("s1", "search", {"q": "tides"})) if not outputs(request) else say(json.dumps(report))
        return call(("r1", "researcher", {"goal": "Research tides"})) if not outputs(request) else say("tides: moon, sun")

    provider = FakeLLMProvider(responder=responder)
    options = Options(provider=provider, subagents=[researcher])
    async with serving(client, task_queue, options, provider) as registry:
        source = await client.start("Why are there tides?", options, task_queue=task_queue)
        assert (await client.result(source)).answer == "tides: moon, sun"
        asked = len(provider.received_requests)  # the parent's two turns and the child's two
        other = FakeLLMProvider(responses=[say("the moon, mostly")])
        registry.add_provider(other, name="other")
        fork = await client.fork(source, at_turn=2, options=Options(provider="other"))
        assert (await client.result(fork)).answer == "the moon, mostly"
    assert len(provider.received_requests) == asked  # the sub-agent did not run again
    (request,) = other.received_requests
    assert [json.loads(o) for o in outputs(request)] == [report]
    types = [e.type for e in await client.events(fork)]
    assert "SubtaskSpawned" not in types and types[0] == "TaskForked"


async def test_fork_of_an_export_on_another_installation(client: AsyncClient, serve, settings, tmp_path, task_queue):
    """An export taken from one installation is forked on another one (its own content store,
    empty until the fork puts the export's bodies there)."""
    from noeta.activities.registry import Registry
    from noeta.client.host import HostConfig
    from noeta.context.content_store import LocalContentStore
    from noeta.worker import build_worker

    source = await run_counting_task(client, serve, task_queue)
    export = await client.export(source)
    laptop_store = LocalContentStore(tmp_path / "laptop")
    laptop = await AsyncClient.connect(HostConfig(settings=settings, content_store=laptop_store))
    runs_before = len(recorded.RUNS)
    other = FakeLLMProvider(responder=fixed_rest)
    queue = f"{task_queue}-laptop"
    registry = Registry.of(tools=[count], providers={"other": other}, content_store=laptop_store)
    async with build_worker(laptop.temporal, registry, queue, workflow_failure_exception_types=[Exception]):
        fork = await laptop.fork(load_task(export), at_turn=3, options=Options(provider="other"), task_queue=queue)
        assert (await laptop.result(fork)).answer == "the other provider's answer"
    assert outputs(other.received_requests[0]) == ["counted 1", "counted 2"]
    assert first_system(other) == "Count carefully."
    assert len(recorded.RUNS) == runs_before + 1  # only the fork's own call ran
    forked = (await laptop.events(fork))[0].payload
    assert forked == TaskForked(source_task_id=source, turn=3)


def first_system(provider: FakeLLMProvider) -> str | None:
    return provider.received_requests[0].system
