"""Exporting a task (its history and the stored bodies it refers to), loading it back, and
replaying recorded turns against a change, on a real dev server with real workers.

A replay asks each recorded model turn again with the transcript as recorded: no tool runs (the
count tool records every run), and a deterministic provider that answers as the recorded one did
changes nothing."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.client.wire import envelope_to_dict
from noeta.context.transcript import NODE_MEDIA_TYPE
from noeta.errors import ExportFormatError
from noeta.protocols.messages import LLMRequest, LLMResponse
from noeta.protocols.turns import ToolCallDecision, TurnDecision
from noeta.sdk.testing import FakeLLMProvider, load_task, replay
from tests.support import recorded
from tests.support.recorded import cli, count, one_change, three_counts
from tests.support.replay import replay as replay_history
from tests.support.scripts import call, say
from tests.support.tools import big_output

SCRIPT = [
    call(("c1", "count", {"n": 1})),
    call(("c2", "count", {"n": 2})),
    call(("c3", "count", {"n": 3})),
    say("three counted"),
]


async def run_counting_task(
    client: AsyncClient, serve, task_queue: str, provider: FakeLLMProvider | None = None
) -> str:
    provider = provider or FakeLLMProvider(responses=list(SCRIPT))
    async with serve(tools=[count], providers=[provider]):
        task_id = await client.start(
            "count to three", Options(provider=provider, allowed_tools=[count], system_prompt="Count carefully."),
            task_queue=task_queue,
        )
        assert (await client.result(task_id)).answer == "three counted"
    return task_id


async def test_export_round_trips_and_replays_the_recorded_decisions(client: AsyncClient, serve, task_queue):
    live_provider = FakeLLMProvider(responses=list(SCRIPT))
    task_id = await run_counting_task(client, serve, task_queue, live_provider)
    export = await client.export(task_id)
    text = json.dumps(export)  # JSON-serialisable as it is
    loaded = load_task(text)
    assert loaded.task_id == task_id and loaded.missing == ()
    # The exported history projects to the live task's event log, envelope for envelope.
    live = [envelope_to_dict(e) for e in await client.events(task_id)]
    assert [envelope_to_dict(e) for e in loaded.events()] == live
    # ...and is a real Temporal history: today's workflow code replays it.
    assert await replay_history(loaded.histories()[0]) is None
    # Every transcript node the model calls stored is in it.
    assert sum(b["media_type"] == NODE_MEDIA_TYPE for b in export["bodies"].values()) == 4
    record = loaded.recorded()
    assert [t.number for t in record.turns] == [1, 2, 3, 4]
    assert [t.decision for t in record.turns] == [
        TurnDecision(tool_calls=(ToolCallDecision("count", {"n": 1}),)),
        TurnDecision(tool_calls=(ToolCallDecision("count", {"n": 2}),)),
        TurnDecision(tool_calls=(ToolCallDecision("count", {"n": 3}),)),
        TurnDecision(answer="three counted"),
    ]
    # The original script, asked again turn by turn: nothing changed, and no tool ran.
    runs_before = len(recorded.RUNS)
    again = FakeLLMProvider(responses=list(SCRIPT))
    report = replay([loaded], provider=again)
    assert (report.tasks, report.turns, report.changed, report.skipped) == (1, 4, (), ())
    assert len(recorded.RUNS) == runs_before
    # Each rebuilt request is the one the worker sent (system prompt, tools, transcript, settings),
    # but for the attempt's timeout, which only a worker has.
    assert [dataclasses.replace(r, timeout_seconds=None) for r in again.received_requests] == [
        dataclasses.replace(r, timeout_seconds=None) for r in live_provider.received_requests
    ]
    assert again.received_requests[-1].system == "Count carefully."


async def test_replay_against_a_change_lists_exactly_the_changed_decision(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responder=three_counts)
    async with serve(tools=[count], providers=[provider]):
        ids = [
            await client.start(f"job {i}", Options(provider=provider, allowed_tools=[count]), task_queue=task_queue)
            for i in range(20)
        ]
        results = await asyncio.gather(*(client.result(t) for t in ids))
    assert {r.answer for r in results} == {f"counted three for job {i}" for i in range(20)}
    exports = [await client.export(t) for t in ids]
    runs_before = len(recorded.RUNS)

    unchanged = replay(exports, provider=FakeLLMProvider(responder=three_counts))
    assert (unchanged.tasks, unchanged.turns, unchanged.changed) == (20, 80, ())
    assert unchanged.summary().startswith("replayed 20 task(s), 80 turn(s): 0 decision(s) changed")

    report = replay(exports, provider=FakeLLMProvider(responder=one_change))
    assert len(report.changed) == 1
    (change,) = report.changed
    assert (change.task_id, change.turn) == (ids[7], 2)
    assert change.recorded == TurnDecision(tool_calls=(ToolCallDecision("count", {"n": 2}),))
    assert change.new == TurnDecision(tool_calls=(ToolCallDecision("count", {"n": 99}),))
    table = report.summary()
    assert ids[7] in table and 'count({"n":2})' in table and 'count({"n":99})' in table
    assert len(recorded.RUNS) == runs_before  # no tool ran in either replay


async def test_replay_changes_the_system_prompt_and_model_of_each_request(client: AsyncClient, serve, task_queue):
    task_id = await run_counting_task(client, serve, task_queue)
    asked: list[LLMRequest] = []

    def answer(request: LLMRequest) -> LLMResponse:
        asked.append(request)
        return three_counts(request)

    loaded = load_task(await client.export(task_id))
    report = replay([loaded], options=Options(system_prompt="Count fast.", model="m-2"), provider=FakeLLMProvider(responder=answer))
    assert {(r.system, r.model) for r in asked} == {("Count fast.", "m-2")}
    # The script answered "three counted"; three_counts names the goal: only the answer changed.
    assert [(c.turn, c.new.answer) for c in report.changed] == [(4, "counted three for count to three")]


async def test_export_carries_stored_tool_outputs(client: AsyncClient, serve, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "big_output", {"kb": 64})), say("big")])
    async with serve(tools=[big_output], providers=[provider]):
        task_id = await client.start("big", Options(provider=provider, allowed_tools=[big_output]), task_queue=task_queue)
        await client.result(task_id)
    export = await client.export(task_id)
    bodies = {digest: base64.b64decode(b["data"]) for digest, b in export["bodies"].items()}
    assert any(len(data) >= 64 * 1024 for data in bodies.values())  # the tool's output, stored apart
    loaded = load_task(export)
    again = FakeLLMProvider(responses=[call(("c1", "big_output", {"kb": 64})), say("big")])
    assert replay([loaded], provider=again).changed == ()
    # The second request carries the whole output, resolved from the export's bodies.
    (result,) = [b for m in again.received_requests[1].messages for b in m.content if b.type == "tool_result"]
    assert isinstance(result.output, str) and len(result.output) >= 64 * 1024


def test_load_task_refuses_what_is_not_an_export():
    with pytest.raises(ExportFormatError, match="format"):
        load_task({"format": "something else"})
    with pytest.raises(ExportFormatError, match="JSON"):
        load_task("{not json")
    with pytest.raises(ExportFormatError, match="runs"):
        load_task({"format": "noeta-task-export/1", "task_id": "t", "runs": [], "bodies": {}})


async def test_load_task_refuses_a_tampered_body(client: AsyncClient, serve, task_queue):
    export = await client.export(await run_counting_task(client, serve, task_queue))
    digest = next(iter(export["bodies"]))
    export["bodies"][digest]["data"] = base64.b64encode(b"something else").decode()
    with pytest.raises(ExportFormatError, match=f"body {digest} .* does not match its hash"):
        load_task(export)


async def test_export_of_an_unknown_task_is_task_not_found(client: AsyncClient):
    from noeta.errors import TaskNotFoundError

    with pytest.raises(TaskNotFoundError):
        await client.export("no-such-task-for-export")


async def test_cli_export_and_replay_exit_codes(
    client: AsyncClient, serve, task_queue, settings, data_dir: Path, tmp_path: Path, capsys, monkeypatch
):
    monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
    monkeypatch.setenv("NOETA_HOME", str(data_dir))
    provider = FakeLLMProvider(responder=three_counts)
    async with serve(tools=[count], providers=[provider]):
        task_id = await client.start("job 7", Options(provider=provider, allowed_tools=[count]), task_queue=task_queue)
        await client.result(task_id)
    code, out, _ = await cli(capsys, "export", task_id)
    assert code == 0
    path = tmp_path / "task.json"
    path.write_text(out)
    assert load_task(path).task_id == task_id
    runs_before = len(recorded.RUNS)

    code, out, _ = await cli(capsys, "replay", str(path), "--provider", "tests.support.recorded:same")
    assert code == 0 and "0 decision(s) changed" in out
    code, out, _ = await cli(capsys, "replay", str(path), "--provider", "tests.support.recorded:changed")
    assert code == 1 and "1 decision(s) changed" in out and 'count({"n":99})' in out
    # A task id is exported from the cluster first.
    code, out, _ = await cli(capsys, "replay", task_id, "--provider", "tests.support.recorded:changed")
    assert code == 1 and task_id in out
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Be brief.")
    code, out, _ = await cli(
        capsys, "replay", str(path), "--provider", "tests.support.recorded:same", "--system-prompt", f"@{prompt}"
    )
    assert code == 0
    assert recorded.same.received_requests[-1].system == "Be brief."
    assert len(recorded.RUNS) == runs_before
    # Bad input: a file that is not an export is one line and exit code 2.
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    code, _, err = await cli(capsys, "replay", str(bad), "--provider", "tests.support.recorded:same")
    assert code == 2 and err.startswith("noeta: ExportFormatError: ")


async def test_a_task_that_continued_as_new_exports_every_run_and_replays(client: AsyncClient, serve, task_queue):
    from tests.test_long_runs import STEPS, counting
    from tests.support.tools import add

    provider = FakeLLMProvider(responder=counting)
    async with serve(tools=[add], providers=[provider]):
        task_id = await client.start(
            "count", Options(provider=provider, allowed_tools=[add], max_history_events=40), task_queue=task_queue
        )
        await client.result(task_id)
    loaded = load_task(await client.export(task_id))
    assert len(loaded.runs) >= 2  # it did continue as new
    turns = loaded.recorded().turns
    assert [t.number for t in turns] == list(range(1, STEPS + 2))  # numbered across the runs
    assert len({t.run for t in turns}) == len(loaded.runs)
    again = FakeLLMProvider(responder=counting)
    report = replay([loaded], provider=again)
    assert (report.turns, report.changed) == (STEPS + 1, ())
    # A later run's turn is rebuilt with the whole transcript, as the worker sent it.
    assert [dataclasses.replace(r, timeout_seconds=None) for r in again.received_requests] == [
        dataclasses.replace(r, timeout_seconds=None) for r in provider.received_requests
    ]


async def test_an_encrypted_task_exports_readable_and_replays(settings, tmp_path: Path, task_queue: str):
    from noeta.security.keys import new_key_entry
    from tests.test_encryption import ANSWER, OUTPUT, plain_provider, ring, run_task

    task_id, secure = await run_task(settings, tmp_path / "content", ring(new_key_entry("v1")), task_queue)
    export = await secure.export(task_id)
    loaded = load_task(export)
    assert ANSWER in repr(loaded.events())  # decoded with the client's codec: readable without it
    again = plain_provider()
    assert replay([loaded], provider=again).changed == ()
    # The tool's stored output (ciphertext in the store) is in the export in the clear.
    second = again.received_requests[1]
    assert any(OUTPUT in str(b.output) for m in second.messages for b in m.content if b.type == "tool_result")


async def test_turns_whose_bodies_were_released_are_skipped_and_named(client: AsyncClient, serve, task_queue):
    export = await client.export(await run_counting_task(client, serve, task_queue))
    nodes = [d for d, b in export["bodies"].items() if b["media_type"] == NODE_MEDIA_TYPE]
    for digest in nodes:  # as if retention had released the stored transcript
        del export["bodies"][digest]
    report = replay([load_task(export)], provider=FakeLLMProvider(responses=list(SCRIPT)))
    # Turn 1 needs no stored transcript (its goal is in the record); the later ones do.
    assert (report.turns, report.changed) == (1, ())
    assert [s.turn for s in report.skipped] == [2, 3, 4]
    assert "3 turn(s) skipped" in report.summary()


def test_a_decision_is_its_tool_calls_or_its_answer():
    from noeta.protocols.messages import TextBlock, ToolUseBlock
    from noeta.protocols.turns import decision_of

    # Call ids are the model's labels: the same calls with other ids are the same decision.
    assert decision_of([ToolUseBlock("a", "count", {"n": 1})]).same_as(decision_of([ToolUseBlock("z", "count", {"n": 1})]))
    assert not decision_of([ToolUseBlock("a", "count", {"n": 1})]).same_as(decision_of([ToolUseBlock("a", "count", {"n": 2})]))
    # Text beside tool calls is not the decision; an answer is.
    assert decision_of([TextBlock("thinking aloud"), ToolUseBlock("a", "count", {"n": 1})]).answer is None
    assert not decision_of([ToolUseBlock("a", "count", {"n": 1})]).same_as(decision_of([TextBlock("done")]))
    # Structured answers compare as data, other answers as text.
    assert decision_of([TextBlock('{"refund": 100, "ok": true}')]).same_as(decision_of([TextBlock('{ "ok": true, "refund": 100 }')]))
    assert not decision_of([TextBlock('{"refund": 100}')]).same_as(decision_of([TextBlock('{"refund": 250}')]))
    assert decision_of([TextBlock("done\n")]).same_as(decision_of([TextBlock("done")]))
    assert not decision_of([TextBlock("done")]).same_as(decision_of([TextBlock("Done")]))
