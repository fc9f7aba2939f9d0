"""What a streamed model call costs in history, pinned: one call of 480 characters adds one
``noeta.stream_batch`` signal holding its text as is, and under 1.2 KB in all (the signal and the
workflow task it causes), against the same task on a worker with NOETA_WORKFLOW_STREAM=0; read or
not (a reader adds nothing). And the batch signal the workflow accepts: a batch sent twice lands
once, malformed ones are dropped without failing a workflow task, the stream's own publish signal
(what older activities sent) still lands, and a reader of history numbers them as the workflow does."""

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
from noeta.client.stream_reader import call_deltas
from noeta.protocols.messages import LLMRequest, LLMResponse, StreamDelta, TextBlock, ToolUseBlock, Usage
from noeta.protocols.names import SIGNAL_STREAM_BATCH, WORKFLOW_STREAM_POLL
from noeta.protocols.stream_batches import CallPieces, batch_body, checked_batch, item_json, item_pieces
from noeta.protocols.tool import ToolResult
from noeta.sdk.tools import tool
from noeta.worker import Registry, build_worker
from tests.support.waiting import eventually

CALLS, PIECES, CHARS = 3, 40, 12
#: Bytes of history a call of PIECES * CHARS characters may add. Measured: ~1,000 (a batch signal
#: of ~710 bytes and its workflow task of ~290); the stream's own publish signal, base64 and all,
#: cost ~1,340 for this call. The margin is for a longer worker identity (host name).
ADDED_PER_CALL = 1_200


@tool(name="note", version="1", input_schema={"type": "object"}, description="Take a note.")
def note(arguments, ctx):
    return ToolResult(success=True, output="noted")


class Bursts:
    """Streams each call's PIECES pieces at once (nothing awaited between them: one batch a call)."""

    name = "bursts"


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
        turn = sum(1 for m in request.messages if m.role == "assistant")
        for text in self.texts(turn):
            on_delta("text", text)
        return self._response(turn)


def signals(history: list, name: str) -> list:
    return [e for e in history if e.HasField("workflow_execution_signaled_event_attributes")
            and e.workflow_execution_signaled_event_attributes.signal_name == name]


async def run_task(client: AsyncClient, content_store, task_queue: str, read: bool) -> tuple[list, list[StreamDelta]]:
    received: list[StreamDelta] = []
    registry = Registry.of(providers=[Bursts()], tools=[note], content_store=content_store)
    task_id = f"wfstream-cost-{uuid.uuid4().hex[:8]}"
    async with build_worker(client.temporal, registry, task_queue):
        async with AsyncClient(client.temporal, content_store=content_store, task_queue=task_queue) as reader:
            stream = await reader.deltas(task_id) if read else None
            reading = asyncio.ensure_future(_read_into(stream, received)) if stream is not None else None
            await client.start("take notes", Options(provider="bursts", allowed_tools=[note], max_turns=CALLS + 1),
                               task_id=task_id, task_queue=task_queue)
            await client.result(task_id)
            if reading is not None:
                await asyncio.wait_for(reading, 60)
    return await client.history(task_id), received


async def _read_into(stream, received: list[StreamDelta]) -> None:
    async for delta in stream:
        received.append(delta)


async def test_a_call_adds_one_compact_batch_to_history_read_or_not(client: AsyncClient, content_store, task_queue: str, monkeypatch):
    unread, _ = await run_task(client, content_store, task_queue, read=False)
    read, received = await run_task(client, content_store, task_queue, read=True)
    monkeypatch.setenv("NOETA_WORKFLOW_STREAM", "0")
    off, _ = await run_task(client, content_store, task_queue, read=False)
    # Every piece, once, in order, as the provider cut them; each call's last one ends it.
    assert [d.text for d in received] == [t for turn in range(CALLS) for t in Bursts.texts(turn)]
    assert [d.seq for d in received] == [i for _ in range(CALLS) for i in range(PIECES)]
    assert [d.final for d in received] == ([False] * (PIECES - 1) + [True]) * CALLS
    # One batch a call, read or not, its text as is: the signal's payload is the text plus ~80 bytes.
    assert not signals(off, SIGNAL_STREAM_BATCH)
    for history in (unread, read):
        batches = signals(history, SIGNAL_STREAM_BATCH)
        assert len(batches) == CALLS
        for event in batches:
            payload = event.workflow_execution_signaled_event_attributes.input.payloads[0]
            assert len(payload.data) <= PIECES * CHARS + PIECES + 80
            assert event.ByteSize() <= PIECES * CHARS + PIECES + 280
        added = sum(e.ByteSize() for e in history) - sum(e.ByteSize() for e in off)
        assert added <= CALLS * ADDED_PER_CALL, f"{added} bytes of history for {CALLS} streamed calls"
    # A reader adds nothing: no signal but the batches, no update, and the unread task's events (the
    # workflow tasks in between may fall differently).
    names = {e.workflow_execution_signaled_event_attributes.signal_name for e in read if e.HasField("workflow_execution_signaled_event_attributes")}
    assert names == {SIGNAL_STREAM_BATCH}
    assert kinds(read) == kinds(unread) and EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED not in kinds(read)


def kinds(history: list) -> list:
    workflow_tasks = {
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    }
    return sorted(e.event_type for e in history if e.event_type not in workflow_tasks)


def test_batches_round_trip_and_bad_ones_are_refused():
    pieces = [("text", "plain"), ("thinking", "hm… \"quoted\""), ("text", ""), ("tool_use", '{"a": ' + "x" * 70 + "}"), ("text", "你好😀")]
    for end in (False, True):
        call = CallPieces("turn-2", 1, 7, pieces, end=end)
        body = json.loads(json.dumps(batch_body("p1", 3, call), ensure_ascii=False))
        assert checked_batch(body) == ("p1", 3, call)
        assert item_pieces(item_json(call)) == call
    text_only = batch_body("p1", 1, CallPieces("turn-1", 1, 0, [("text", "ab"), ("text", "cde")]))
    assert text_only == {"i": "p1", "n": 1, "c": "turn-1", "a": 1, "s": 0, "t": "abcde", "l": "23"}  # no kinds, no end
    good = {"i": "p", "n": 1, "c": "c", "a": 1, "s": 0, "t": "abc", "l": "12"}
    assert checked_batch(good) == ("p", 1, CallPieces("c", 1, 0, [("text", "a"), ("text", "bc")]))
    assert checked_batch({**good, "e": 1}) == ("p", 1, CallPieces("c", 1, 0, [("text", "a"), ("text", "bc")], end=True))
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
        first = batch_body("pub-a", 1, CallPieces("turn-9", 1, 0, [("text", "one "), ("text", "two ")]))
        await handle.signal(SIGNAL_STREAM_BATCH, first)
        await handle.signal(SIGNAL_STREAM_BATCH, first)  # sent again (a retried signal): dropped
        for bad in ({"i": "pub-a", "n": 2}, "not a batch", {**batch_body("pub-a", 2, CallPieces("turn-9", 1, 2, [("text", "x")])), "l": "9"}):
            await handle.signal(SIGNAL_STREAM_BATCH, bad)
        # What an older activity sent: the stream's own publish signal, the item base64-encoded.
        old = WorkflowStreamClient(handle, client=client.temporal, batch_interval=timedelta(days=1))
        old.topic("turn-9#1").publish(Payload(metadata={"encoding": b"json/plain"}, data=item_json(CallPieces("turn-9", 1, 2, [("text", "three ")]))))
        await old.flush()
        await handle.signal(SIGNAL_STREAM_BATCH, batch_body("pub-a", 2, CallPieces("turn-9", 1, 3, [("thinking", "four")], end=True)))

        async def items() -> list[StreamDelta]:
            result = await handle.query(WORKFLOW_STREAM_POLL, PollInput(from_offset=0), result_type=PollResult)
            out = []
            for item in result.items:
                payload = Payload()
                payload.ParseFromString(base64.b64decode(item.data))
                out += call_deltas(task_id, item_pieces(payload.data), item.offset)
            return out

        await eventually(lambda: _has_four(items), timeout=30)
        deltas = await items()
        held.release.set()
        assert (await client.result(task_id)).answer == "done"
        history = await client.history(task_id)
        read = [d async for d in await client.deltas(task_id)]  # from history: the same items, offsets
    assert [(d.text, d.kind, d.seq, d.offset, d.final) for d in deltas] == [
        ("one ", "text", 0, 0, False), ("two ", "text", 1, 0, False), ("three ", "text", 2, 1, False),
        ("four", "thinking", 3, 2, True),
    ]
    assert read == deltas
    assert len(signals(history, SIGNAL_STREAM_BATCH)) == 6  # all recorded; the workflow dropped three
    assert not [e for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]


async def _has_four(items) -> bool:
    return len(await items()) >= 4

