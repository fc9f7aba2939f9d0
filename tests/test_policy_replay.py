"""Replaying a policy over recorded tasks (noeta.sdk.testing.replay(..., policy=P), noeta replay
--policy): at each recorded model turn the View the workflow had before it is rebuilt from the
record and the policy decides; its model calls are answered by the provider, or without one by
the record when the request is the recorded one; its tool calls or finish are compared directly.
No tool runs (the count tool records every run). Tasks run on a real dev server with real workers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from noeta.builtins.llm_policy import LLMPolicy
from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.errors import ConfigurationError
from noeta.protocols.turns import ToolCallDecision, TurnDecision
from noeta.sdk.testing import FakeLLMProvider, PolicyStep, load_task, replay
from tests.support import recorded
from tests.support.recorded import cli, count, one_change, three_counts
from tests.support.replay_policies import BrokenAtTurnTwo, StopJobSevenEarly, ViewDependentPolicy, stop_at_three


async def test_a_policy_that_changes_one_decision_is_reported_exactly_there(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=three_counts)
    async with serve(tools=[count], providers=[provider]):
        ids = [
            await client.start(f"job {i}", Options(provider=provider, allowed_tools=[count]), task_queue=task_queue)
            for i in range(20)
        ]
        await asyncio.gather(*(client.result(t) for t in ids))
    exports = [await client.export(t) for t in ids]
    runs_before = len(recorded.RUNS)

    # The tasks' own policy, no provider: every model call is the recorded request, answered by the record.
    same = replay(exports, policy=LLMPolicy())
    assert (same.tasks, same.turns, same.changed, same.skipped) == (20, 80, (), ())

    # A policy that finishes job 7 before its third model call: that one decision, nothing else.
    report = replay(exports, policy=StopJobSevenEarly())
    assert [(c.task_id, c.turn) for c in report.changed] == [(ids[7], 3)]
    (change,) = report.changed
    assert change.recorded == TurnDecision(tool_calls=(ToolCallDecision("count", {"n": 3}),))
    assert change.new == TurnDecision(answer="two counts are enough")
    assert "two counts are enough" in report.summary()

    # The policy's model calls are asked of a provider when one is given.
    asked = replay(exports, policy=LLMPolicy(), provider=FakeLLMProvider(responder=one_change))
    assert [(c.task_id, c.turn) for c in asked.changed] == [(ids[7], 2)]

    # A model call with another request and no provider to answer it: a change, saying how it differs.
    other = replay(exports, policy=ViewDependentPolicy())
    assert len(other.changed) == 80 and all(isinstance(c.new, PolicyStep) for c in other.changed)
    assert "max_tokens 1" in other.changed[0].new.describe(200) and "no provider" in other.changed[0].new.describe(200)
    # ...which a provider answers as the recorded one did: nothing changed, each request as the policy made it.
    answering = FakeLLMProvider(responder=three_counts)
    assert replay(exports[:1], policy=ViewDependentPolicy(), provider=answering).changed == ()
    assert [r.max_tokens for r in answering.received_requests] == [1000 + 100 * t + 10 * (50 - t) + 3 * t for t in range(4)]

    # A policy that raises is a change at the turn where it does.
    broken = replay(exports, policy=BrokenAtTurnTwo())
    assert {(c.turn, c.new.describe(200)) for c in broken.changed} == {(2, "the policy raised RuntimeError: no second call")}
    assert len(broken.changed) == 20
    assert len(recorded.RUNS) == runs_before  # no tool ran in any replay


async def test_the_tasks_own_policy_replays_unchanged_over_goals(client: AsyncClient, serve, task_queue):
    """The View is the workflow's: a policy whose requests depend on the turn count in the goal,
    the budget and the usage so far reproduces every recorded request, over two goals."""
    provider = FakeLLMProvider(responder=three_counts)
    options = Options(provider=provider, allowed_tools=[count], policy=ViewDependentPolicy(), max_turns=12)
    async with serve(tools=[count], providers=[provider]):
        task_id = await client.start("count to three", options, task_queue=task_queue, keep_open=True)
        second = await client.send_goal(task_id, "and say it again")
        assert second.answer == "counted three for count to three"
        await client.close_task(task_id)
        await client.result(task_id)
    loaded = load_task(await client.export(task_id))
    assert [t.number for t in loaded.recorded().turns] == [1, 2, 3, 4, 5]
    # The recorded requests carry the policy's View-dependent max_tokens (usage: 3 output tokens
    # a tool call, 5 an answer).
    assert [t.request.max_tokens for t in loaded.recorded().turns] == [1120, 1213, 1306, 1399, 1134]
    runs_before = len(recorded.RUNS)

    assert replay([loaded], policy=ViewDependentPolicy()).changed == ()
    report = replay([loaded], policy=stop_at_three)
    assert [(c.turn, c.new) for c in report.changed] == [(4, TurnDecision(answer="stopped after 3 turns"))]
    assert len(recorded.RUNS) == runs_before


def test_a_replay_without_provider_needs_a_policy_and_an_unchanged_request():
    with pytest.raises(ConfigurationError, match="needs a provider"):
        replay([], policy=None)
    with pytest.raises(ConfigurationError, match="changed model"):
        replay([], options=Options(model="m-2"), policy=LLMPolicy())
    with pytest.raises(ConfigurationError, match="not a Policy"):
        replay([], policy="tests.support.recorded:RUNS")


async def test_cli_replay_with_a_policy_exit_codes(
    client: AsyncClient, serve, task_queue, settings, data_dir: Path, tmp_path: Path, capsys, monkeypatch
):
    monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
    monkeypatch.setenv("NOETA_HOME", str(data_dir))
    provider = FakeLLMProvider(responder=three_counts)
    options = Options(provider=provider, allowed_tools=[count], policy=ViewDependentPolicy(), max_turns=12)
    async with serve(tools=[count], providers=[provider]):
        task_id = await client.start("job 1", options, task_queue=task_queue)
        await client.result(task_id)
    path = tmp_path / "task.json"
    path.write_text((await cli(capsys, "export", task_id))[1])
    runs_before = len(recorded.RUNS)
    policies = "tests.support.replay_policies"

    code, out, _ = await cli(capsys, "replay", str(path), "--policy", f"{policies}:ViewDependentPolicy")
    assert code == 0 and "0 decision(s) changed" in out
    code, out, _ = await cli(capsys, "replay", task_id, "--policy", f"{policies}:stop_at_three")
    assert code == 1 and "1 decision(s) changed" in out and "stopped after 3 turns" in out
    code, out, _ = await cli(
        capsys, "replay", str(path), "--policy", f"{policies}:ViewDependentPolicy", "--provider", "tests.support.recorded:changed"
    )
    assert code == 0  # job 1 is not the task one_change changes
    code, _, err = await cli(capsys, "replay", str(path), "--policy", f"{policies}:Nowhere")
    assert code == 2 and err.startswith("noeta: ConfigurationError: ")
    assert len(recorded.RUNS) == runs_before
