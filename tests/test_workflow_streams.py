"""Streamed deltas through Temporal alone (Temporal's Workflow Streams hosted by the task's
workflow): a Client with a delta_sink and a ``noeta worker`` in another process, nothing but the
dev server between them, receives every piece in order; a reader joining mid-call gets the call's
pieces from its offset; a call nobody listens to publishes nothing (no signal in history)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import uuid
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.protocols.messages import StreamDelta
from noeta.protocols.names import WORKFLOW_STREAM_PUBLISH
from tests.support.chat_server import FakeChatServer, Pause, chunks_for, completion
from tests.support.processes import ROOT, start_worker
from tests.support.waiting import eventually

ANSWER = "Pieces reach any client through Temporal alone, in order, from any offset."
PIECES = 12


def publish_signals(history: list) -> int:
    return sum(
        1 for e in history
        if e.HasField("workflow_execution_signaled_event_attributes")
        and e.workflow_execution_signaled_event_attributes.signal_name == WORKFLOW_STREAM_PUBLISH
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
            # A reader joining mid-call gets the call's pieces from its first one...
            async with AsyncClient(client.temporal, content_store=host.store(), task_queue=task_queue) as late:
                from_start = await late.deltas(task_id)
                first = received[0].offset
                after_first = await late.deltas(task_id, after=first)  # ...or after an offset it names
                go.set()
                result = await client.result(task_id)
                late_all = await asyncio.wait_for(read_all(from_start), 60)  # it ends after the task's last piece
                late_after = await asyncio.wait_for(read_all(after_first), 60)
            await eventually(lambda: "".join(d.text for d in received) == ANSWER, timeout=30)
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
    assert late_all == received
    assert late_after == [d for d in received if d.offset > first] and late_after
    assert [d.offset for d in received] == sorted(d.offset for d in received)
    assert 1 <= publish_signals(history) <= 4  # batched: a few signals for 12 pieces
