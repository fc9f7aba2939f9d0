"""Streamed deltas through Temporal alone (batches in the task's history, read by following it): a
Client with a delta_sink and a ``noeta worker`` in another process, nothing but the dev server
between them, receives every piece in order; a reader joining mid-call gets every piece, from any
offset (inclusive) or after any piece; a reader gets every piece across continue-as-new."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import uuid
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.deltas import read_resuming
from noeta.client.options import HostConfig, Options
from noeta.client.sync import Client
from noeta.protocols.messages import LLMRequest, LLMResponse, StreamDelta, TextBlock, ToolUseBlock, Usage
from noeta.protocols.names import SIGNAL_STREAM_BATCH
from noeta.protocols.tool import ToolResult
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker
from tests.support.chat_server import FakeChatServer, Pause, chunks_for, completion, openai_for
from tests.support.processes import ROOT, start_worker
from tests.support.waiting import eventually

ANSWER = "Pieces reach any client through Temporal alone, in order, from any offset."
PIECES = 12


def publish_signals(history: list) -> int:
    return sum(
        1 for e in history
        if e.HasField("workflow_execution_signaled_event_attributes")
        and e.workflow_execution_signaled_event_attributes.signal_name == SIGNAL_STREAM_BATCH
    )


async def read_all(stream) -> list[StreamDelta]:
    return [d async for d in stream]


async def test_a_worker_process_streams_to_any_client_through_temporal_alone(
    host: HostConfig, settings, data_dir: Path, task_queue: str, chat: FakeChatServer
):
    go = threading.Event()
    full = chunks_for(completion({"content": ANSWER}), pieces=PIECES)
    chat.reply([*full[:7], Pause(120, until=go), *full[7:]])  # held mid-call until the late reader joined
    env = {
        **{k: v for k, v in os.environ.items() if k != "NOETA_DELTA_BROKER"},
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "NOETA_HOME": str(data_dir),
        "NOETA_TEST_CHAT_URL": chat.base_url,
        "PYTHONPATH": str(ROOT),
    }
    worker = await asyncio.to_thread(start_worker, env, task_queue, "tests.support.registry:streaming_registry")
    received: list[StreamDelta] = []
    task_id = f"wfstream-{uuid.uuid4().hex[:10]}"
    try:
        async with await AsyncClient.connect(dataclasses.replace(host, delta_sink=received.append)) as client:
            await client.start("stream it", Options(provider="openai-stream"), task_id=task_id, task_queue=task_queue)
            await eventually(lambda: len(received) >= 6, timeout=60)  # the call is held after its 6th piece
            assert all(d.offset is not None for d in received)
            # A reader joining mid-call gets every piece...
            async with AsyncClient(client.temporal, content_store=host.store(), task_queue=task_queue) as late:
                from_start = await late.deltas(task_id)
                first = received[0].offset
                from_first = await late.deltas(task_id, after=first)  # ...also from the first offset (inclusive)
                after_third = await late.deltas(task_id, after=received[2])  # ...or the rest after a piece
                go.set()
                result = await client.result(task_id)
                # result() returned: the sink has every piece already, the last one marked final
                assert "".join(d.text for d in received) == ANSWER and received[-1].final
                late_all = await asyncio.wait_for(read_all(from_start), 60)  # it ends after the task's last piece
                late_first = await asyncio.wait_for(read_all(from_first), 60)
                late_rest = await asyncio.wait_for(read_all(after_third), 60)
            history = await client.history(task_id)
    finally:
        worker.terminate()
        worker.wait(15)
    assert result.answer == ANSWER
    pieces = [c["choices"][0]["delta"]["content"] for c in full if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(pieces) > 8
    assert [d.text for d in received] == pieces  # every piece, once, in order
    assert [d.seq for d in received] == list(range(len(pieces)))
    assert {(d.task_id, d.call_id, d.attempt, d.kind) for d in received} == {(task_id, "turn-1", 1, "text")}
    assert late_all == received == late_first
    assert late_rest == received[3:]
    assert [d.final for d in received] == [False] * (len(pieces) - 1) + [True]
    assert [d.offset for d in received] == sorted(d.offset for d in received)
    assert 1 <= publish_signals(history) <= 4  # batched: a few signals for 12 pieces


@tool(name="note", version="1", input_schema={"type": "object"}, description="Take a note.")
def note(arguments, ctx):
    return ToolResult(success=True, output="noted")


class Streamer:
    """Streams each call's text in 6 pieces (a tool call for the first CALLS - 1 calls)."""

    name = "streamer"
    CALLS = 6

    def __init__(self) -> None:
        self.go = asyncio.Event()  # the first call waits until the test lets it go

    def _texts(self, request: LLMRequest) -> tuple[int, list[str]]:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        return turn, [f"[{turn}.{i}]" for i in range(6)]

    def _response(self, turn: int, text: str) -> LLMResponse:
        if turn + 1 < self.CALLS:
            return LLMResponse(
                stop_reason="tool_use", usage=Usage(output=6),
                content=[TextBlock(text=text), ToolUseBlock(call_id=f"c{turn}", tool_name="note", arguments={})],
            )
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text=text)], usage=Usage(output=6))

    def complete(self, request: LLMRequest) -> LLMResponse:
        turn, texts = self._texts(request)
        return self._response(turn, "".join(texts))

    async def stream(self, request: LLMRequest, on_delta) -> LLMResponse:
        turn, texts = self._texts(request)
        await self.go.wait()
        for text in texts:
            await asyncio.sleep(0.02)
            on_delta("text", text)
        return self._response(turn, "".join(texts))


async def test_a_reader_gets_every_piece_across_continue_as_new(client: AsyncClient, content_store, task_queue: str):
    """The task continues as new every few calls; a reader that started at its beginning gets every
    piece of every call, once, in order, with offsets growing across the runs."""
    streamer = Streamer()
    registry = Registry.of(providers=[streamer], tools=[note], content_store=content_store)
    task_id = f"wfstream-can-{uuid.uuid4().hex[:8]}"
    options = Options(provider="streamer", allowed_tools=[note], max_turns=10, max_history_events=40)
    async with build_worker(client.temporal, registry, task_queue):
        async with AsyncClient(client.temporal, content_store=content_store, task_queue=task_queue) as reader:
            stream = await reader.deltas(task_id)  # before the task exists: it waits for it
            reading = asyncio.ensure_future(read_all(stream))
            await client.start("take notes", options, task_id=task_id, task_queue=task_queue)
            streamer.go.set()
            await client.result(task_id)
            received = await asyncio.wait_for(reading, 60)
    description = await client.temporal.get_workflow_handle(task_id).describe()
    assert description.raw_description.workflow_execution_info.first_run_id != description.run_id  # it continued as new
    assert [d.text for d in received] == [f"[{t}.{i}]" for t in range(Streamer.CALLS) for i in range(6)]
    assert [d.call_id for d in received[::6]] == [f"turn-{t + 1}" for t in range(Streamer.CALLS)]
    offsets = [d.offset for d in received]
    assert offsets == sorted(offsets) and len(set(offsets)) >= Streamer.CALLS


async def test_the_synchronous_client_gets_a_worker_processs_pieces_through_temporal(
    host: HostConfig, settings, data_dir: Path, task_queue: str, chat: FakeChatServer
):
    """The README's Client (synchronous) with a delta_sink, a noeta worker in another process."""
    full = chunks_for(completion({"content": ANSWER}), pieces=6)
    chat.reply(full)
    pieces = [c["choices"][0]["delta"]["content"] for c in full if c["choices"] and c["choices"][0]["delta"].get("content")]
    env = {
        **{k: v for k, v in os.environ.items() if k != "NOETA_DELTA_BROKER"},
        "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir),
        "NOETA_TEST_CHAT_URL": chat.base_url, "PYTHONPATH": str(ROOT),
    }
    worker = await asyncio.to_thread(start_worker, env, task_queue, "tests.support.registry:streaming_registry")
    received: list[StreamDelta] = []

    def run() -> str:
        with Client(dataclasses.replace(host, delta_sink=received.append, task_queue=task_queue)) as client:
            task_id = client.start("stream it", Options(provider="openai-stream"))
            answer = client.result(task_id).answer
            got = list(received)  # every piece is there when result() returns
            late = list(client.deltas(task_id))  # the synchronous client reads a stream too
            return answer, got, late

    try:
        answer, got, late = await asyncio.to_thread(run)
    finally:
        worker.terminate()
        worker.wait(15)
    assert answer == ANSWER
    assert [d.text for d in got] == pieces and [d.seq for d in got] == list(range(len(pieces)))
    assert late == got


async def test_a_retried_call_streams_both_attempts_marked(client: AsyncClient, content_store, task_queue: str, chat: FakeChatServer):
    """A call cut short is retried by Temporal: the reader gets the cut attempt's partial text and
    then the new attempt's pieces from seq 0, each marked with its attempt."""
    full = chunks_for(completion({"content": ANSWER}), pieces=8)
    go = threading.Event()
    chat.reply([*full[:4], Pause(60, until=go)], done=False)  # attempt 1 ends mid-answer
    chat.reply(full)
    pieces = [c["choices"][0]["delta"]["content"] for c in full if c["choices"] and c["choices"][0]["delta"].get("content")]
    registry = Registry.of(providers=[openai_for(chat, "openai-retried")], content_store=content_store)
    task_id = f"wfstream-retry-{uuid.uuid4().hex[:8]}"
    async with build_worker(client.temporal, registry, task_queue):
        async with AsyncClient(client.temporal, content_store=content_store, task_queue=task_queue) as reader:
            await client.start("stream it", Options(provider="openai-retried"), task_id=task_id, task_queue=task_queue)
            stream = await reader.deltas(task_id)
            first = [await asyncio.wait_for(stream.__anext__(), 60)]  # attempt 1 is being read
            go.set()
            assert (await client.result(task_id)).answer == ANSWER
            received = first + await asyncio.wait_for(read_all(stream), 60)
    by_attempt = {a: [d for d in received if d.attempt == a] for a in (1, 2)}
    assert [d.text for d in by_attempt[2]] == pieces and [d.seq for d in by_attempt[2]] == list(range(len(pieces)))
    assert by_attempt[1] and ANSWER.startswith("".join(d.text for d in by_attempt[1]))
    assert received == by_attempt[1] + by_attempt[2]  # the cut attempt's pieces, then the new one's


async def test_a_failed_read_goes_on_after_the_last_piece_taken(client: AsyncClient, content_store, task_queue: str):
    """A read that fails (here: the taker refuses a piece of the last call) starts again after the
    last piece taken, within the batch that holds it, and reads to the task's end: every piece
    arrives once, in order, the refused one when it is read again."""
    streamer = Streamer()
    streamer.go.set()
    registry = Registry.of(providers=[streamer], tools=[note], content_store=content_store)
    task_id = f"wfstream-resume-{uuid.uuid4().hex[:8]}"
    taken: list[str] = []
    refused: list[str] = []

    def take(delta: StreamDelta) -> None:
        if delta.text == "[5.3]" and not refused:
            refused.append(delta.text)
            raise ConnectionError("the reader's connection dropped")
        taken.append(delta.text)

    options = Options(provider="streamer", allowed_tools=[note], max_turns=10)
    async with build_worker(client.temporal, registry, task_queue):
        await client.start("take notes", options, task_id=task_id, task_queue=task_queue)
        read = await asyncio.wait_for(read_resuming(client.temporal, task_id, None, take), 60)
    assert read and refused == ["[5.3]"]
    # The refused piece was not taken, so the read began again at it.
    assert taken == [f"[{t}.{i}]" for t in range(Streamer.CALLS) for i in range(6)]


async def test_a_long_lived_client_keeps_nothing_of_a_task_once_its_stream_is_read(
    host: HostConfig, content_store, task_queue: str
):
    """The followed task's reader and its pieces' bookkeeping go when the task's stream has been
    read to its end; following the ended task again delivers nothing twice."""
    streamer = Streamer()
    streamer.go.set()
    registry = Registry.of(providers=[streamer], tools=[note], content_store=content_store)
    received: list[StreamDelta] = []
    options = Options(provider="streamer", allowed_tools=[note], max_turns=10)
    async with await AsyncClient.connect(dataclasses.replace(host, delta_sink=received.append)) as client:
        async with build_worker(client.temporal, registry, task_queue):
            task_id = await client.start("take notes", options, task_queue=task_queue)
            await client.result(task_id)
            deltas = client._deltas
            await eventually(lambda: task_id not in deltas._followed, timeout=30)
            assert task_id not in deltas._last_seq
            count = len(received)
            deltas.follow(task_id)
            await asyncio.sleep(1)
    assert count == Streamer.CALLS * 6 == len(received)
