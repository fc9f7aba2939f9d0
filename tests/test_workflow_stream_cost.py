"""What a streamed model call costs in history, pinned: one call of 480 characters read by a
client adds one ``noeta.stream_batch`` signal holding its text as is, and under 1 KB in all (the
signal and the workflow task it causes), against the same task nobody reads. And the batch signal
the workflow accepts: a batch sent twice lands once, malformed ones are dropped without failing a
workflow task, and the stream's own publish signal (what older activities sent) still lands."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from datetime import timedelta

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStreamClient

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.deltas.workflow_stream import batch_deltas
from noeta.protocols.messages import LLMRequest, LLMResponse, StreamDelta, TextBlock, ToolUseBlock, Usage
from noeta.protocols.names import SIGNAL_STREAM_BATCH, WORKFLOW_STREAM_POLL
from noeta.protocols.stream_batches import batch_body, checked_batch, item_json, item_pieces
from noeta.protocols.tool import ToolResult
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker
from tests.support.waiting import eventually, until_a_reader_listens

CALLS, PIECES, CHARS = 3, 40, 12
#: Bytes of history a read call of PIECES * CHARS characters may add. Measured: ~1,000 (a batch
#: signal of ~710 bytes and its workflow task of ~290); the stream's own publish signal, base64 and
#: all, cost ~1,340 for this call. The margin is for a longer worker identity (host name).
ADDED_PER_CALL = 1_200
#: The reader's listen signal and the workflow task it causes, once per task.
LISTEN = 450


@tool(name="note", version="1", input_schema={"type": "object"}, description="Take a note.")
def note(arguments, ctx):
    return ToolResult(success=True, output="noted")


class Bursts:
    """Streams each call's PIECES pieces at once (nothing awaited between them: one batch a call)."""

    name = "bursts"

    def __init__(self, received: list[StreamDelta] | None = None) -> None:
        self.go = asyncio.Event()  # calls wait until the reader listens
        self.received = received  # and each until the reader has the calls before it (the stream keeps two)

    @staticmethod
    def texts(turn: int) -> list[str]:
        return [f"{turn}.{i:03d}".ljust(CHARS, "~") for i in range(PIECES)]

    def _response(self, turn: int) -> LLMResponse:
        text = "".join(self.texts(turn))
        if turn + 1 < CALLS:
            return LLMResponse(
                stop_reason="tool_use", usage=Usage(output=PIECES),
                content=[TextBlock(text=text), ToolUseBlock(call_id=f"c{turn}", tool_name="note", arguments={})],
            )
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text=text)], usage=Usage(output=PIECES))

    def complete(self, request: LLMRequest) -> LLMResponse:
        return self._response(sum(1 for m in request.messages if m.role == "assistant"))

    async def stream(self, request: LLMRequest, on_delta) -> LLMResponse:
        await self.go.wait()
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if self.received is not None:
            await eventually(lambda: len(self.received or ()) >= turn * PIECES, timeout=60)
        for text in self.texts(turn):
            on_delta("text", text)
        return self._response(turn)


def signals(history: list, name: str) -> list:
    return [e for e in history if e.HasField("workflow_execution_signaled_event_attributes")
            and e.workflow_execution_signaled_event_attributes.signal_name == name]


async def run_task(client: AsyncClient, content_store, task_queue: str, read: bool) -> tuple[list, list[StreamDelta]]:
    received: list[StreamDelta] = []
    streamer = Bursts(received if read else None)
    registry = Registry.of(providers=[streamer], tools=[note], content_store=content_store)
    task_id = f"wfstream-cost-{uuid.uuid4().hex[:8]}"
    async with build_worker(client.temporal, registry, task_queue):
        async with AsyncClient(client.temporal, content_store=content_store, task_queue=task_queue) as reader:
            stream = await reader.deltas(task_id) if read else None
            reading = asyncio.ensure_future(_read_into(stream, received)) if stream is not None else None
            await client.start("take notes", Options(provider="bursts", allowed_tools=[note], max_turns=CALLS + 1),
                               task_id=task_id, task_queue=task_queue)
            if read:
                await until_a_reader_listens(client.temporal, task_id)
            streamer.go.set()
            await client.result(task_id)
            if reading is not None:
                await asyncio.wait_for(reading, 60)
    return await client.history(task_id), received


async def _read_into(stream, received: list[StreamDelta]) -> None:
    async for delta in stream:
        received.append(delta)


async def test_a_read_call_adds_one_compact_batch_to_history(client: AsyncClient, content_store, task_queue: str):
    quiet, _ = await run_task(client, content_store, task_queue, read=False)
    read, received = await run_task(client, content_store, task_queue, read=True)
    # Every piece, once, in order, as the provider cut them.
    assert [d.text for d in received] == [t for turn in range(CALLS) for t in Bursts.texts(turn)]
    assert [d.seq for d in received] == [i for _ in range(CALLS) for i in range(PIECES)]
    # One batch a call, its text as is: the signal's payload is the text plus ~70 bytes.
    batches = signals(read, SIGNAL_STREAM_BATCH)
    assert len(batches) == CALLS and not signals(quiet, SIGNAL_STREAM_BATCH)
    for event in batches:
        payload = event.workflow_execution_signaled_event_attributes.input.payloads[0]
        assert len(payload.data) <= PIECES * CHARS + PIECES + 80
        assert event.ByteSize() <= PIECES * CHARS + PIECES + 280
    added = sum(e.ByteSize() for e in read) - sum(e.ByteSize() for e in quiet)
    assert added <= CALLS * ADDED_PER_CALL + LISTEN, f"{added} bytes of history for {CALLS} read calls"


def test_batches_round_trip_and_bad_ones_are_refused():
    pieces = [("text", "plain"), ("thinking", "hm… \"quoted\""), ("text", ""), ("tool_use", '{"a": ' + "x" * 70 + "}"), ("text", "你好😀")]
    body = json.loads(json.dumps(batch_body("p1", 3, "turn-2", 1, 7, pieces), ensure_ascii=False))
    assert checked_batch(body) == ("p1", 3, "turn-2", 1, 7, pieces)
    assert item_pieces(item_json("turn-2", 1, 7, pieces)) == ("turn-2", 1, 7, pieces)
    text_only = batch_body("p1", 1, "turn-1", 1, 0, [("text", "ab"), ("text", "cde")])
    assert text_only == {"i": "p1", "n": 1, "c": "turn-1", "a": 1, "s": 0, "t": "abcde", "l": "23"}  # no kinds
    good = {"i": "p", "n": 1, "c": "c", "a": 1, "s": 0, "t": "abc", "l": "12"}
    assert checked_batch(good) == ("p", 1, "c", 1, 0, [("text", "a"), ("text", "bc")])
    for bad in (None, [], "x", {**good, "l": "2"}, {**good, "l": "~3"}, {**good, "l": "~3x."}, {**good, "n": -1},
                {**good, "s": True}, {**good, "k": "tz"}, {**good, "k": "t"}, {**good, "t": 5}, {k: v for k, v in good.items() if k != "i"}):
        assert checked_batch(bad) is None, bad


class Held:
    """A call that streams nothing and waits until released: its task runs meanwhile."""

    name = "held"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    def complete(self, request: LLMRequest) -> LLMResponse:
        raise AssertionError("streams")

    async def stream(self, request: LLMRequest, on_delta) -> LLMResponse:
        await self.release.wait()
        return LLMResponse(stop_reason="end_turn", content=[TextBlock(text="done")], usage=Usage(output=1))


async def test_the_workflow_takes_each_batch_once_and_drops_bad_ones(client: AsyncClient, content_store, task_queue: str):
    held = Held()
    registry = Registry.of(providers=[held], content_store=content_store)
    task_id = f"wfstream-batches-{uuid.uuid4().hex[:8]}"
    async with build_worker(client.temporal, registry, task_queue):
        await client.start("hold", Options(provider="held"), task_id=task_id, task_queue=task_queue)
        handle = client.temporal.get_workflow_handle(task_id)
        first = batch_body("pub-a", 1, "turn-9", 1, 0, [("text", "one "), ("text", "two ")])
        await handle.signal(SIGNAL_STREAM_BATCH, first)
        await handle.signal(SIGNAL_STREAM_BATCH, first)  # sent again (a retried signal): dropped
        for bad in ({"i": "pub-a", "n": 2}, "not a batch", {**batch_body("pub-a", 2, "turn-9", 1, 2, [("text", "x")]), "l": "9"}):
            await handle.signal(SIGNAL_STREAM_BATCH, bad)
        # What an older activity sent: the stream's own publish signal, the item base64-encoded.
        old = WorkflowStreamClient(handle, client=client.temporal, batch_interval=timedelta(days=1))
        old.topic("turn-9#1").publish(Payload(metadata={"encoding": b"json/plain"}, data=item_json("turn-9", 1, 2, [("text", "three ")])))
        await old.flush()
        await handle.signal(SIGNAL_STREAM_BATCH, batch_body("pub-a", 2, "turn-9", 1, 3, [("thinking", "four")]))

        async def items() -> list[StreamDelta]:
            result = await handle.query(WORKFLOW_STREAM_POLL, PollInput(from_offset=0), result_type=PollResult)
            out = []
            for item in result.items:
                payload = Payload()
                payload.ParseFromString(base64.b64decode(item.data))
                out += batch_deltas(task_id, payload, item.offset)
            return out

        await eventually(lambda: _has_four(items), timeout=30)
        deltas = await items()
        held.release.set()
        assert (await client.result(task_id)).answer == "done"
        history = await client.history(task_id)
    assert [(d.text, d.kind, d.seq, d.offset) for d in deltas] == [
        ("one ", "text", 0, 0), ("two ", "text", 1, 0), ("three ", "text", 2, 1), ("four", "thinking", 3, 2)
    ]
    assert len(signals(history, SIGNAL_STREAM_BATCH)) == 6  # all recorded; the workflow dropped three
    assert not [e for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]


async def _has_four(items) -> bool:
    return len(await items()) >= 4

