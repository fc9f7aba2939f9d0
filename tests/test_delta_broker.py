"""Streamed deltas reach any Client: from a ``noeta worker`` process through Redis pub/sub
(``NOETA_DELTA_BROKER``), and from a worker in the same process through the in-process broker.
Ordered per call (``seq``), marked by attempt; a broker's pieces are never in history (the task's
workflow stream, which has them all, is: a delta_sink has every piece when the answer comes)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.protocols.messages import StreamDelta
from noeta.worker import Registry, build_worker
from tests.support.chat_server import FakeChatServer, Pause, chunks_for, completion, openai_for
from tests.support.processes import ROOT, free_port, start_worker
from tests.support.waiting import eventually

REDIS_URL = "redis://127.0.0.1:6379/0"
ANSWER = "Deltas cross processes through Redis, in order."


def redis_available() -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", 6379)) == 0


def of_task(deltas: list[StreamDelta], task_id: str) -> list[StreamDelta]:
    return [d for d in deltas if d.task_id == task_id]  # other tasks of the namespace stream too


@pytest.mark.skipif(not redis_available(), reason="needs Redis on 127.0.0.1:6379")
async def test_a_worker_process_streams_to_a_client_in_another_process_through_redis(
    settings, content_store, data_dir: Path, task_queue: str, chat: FakeChatServer
):
    full = chunks_for(completion({"content": ANSWER}), pieces=8)
    chat.reply(full[:4], done=False)  # the first attempt is cut short: retried by Temporal
    chat.reply(full)
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "NOETA_HOME": str(data_dir),
        "NOETA_DELTA_BROKER": REDIS_URL,
        "NOETA_TEST_CHAT_URL": chat.base_url,
        "PYTHONPATH": str(ROOT),
    }
    worker = await asyncio.to_thread(start_worker, env, task_queue, "tests.support.registry:streaming_registry")
    received: list[StreamDelta] = []
    host = HostConfig(
        settings=settings.model_copy(update={"delta_broker_url": REDIS_URL}), content_store=content_store,
        delta_sink=received.append,
    )
    task_id = f"stream-{uuid.uuid4().hex[:10]}"
    try:
        async with await AsyncClient.connect(host) as client:
            async with await client.deltas(task_id) as stream:  # one task's deltas, as an iterator
                await client.start("stream it", Options(provider="openai-stream"), task_id=task_id, task_queue=task_queue)
                result = await client.result(task_id)
                assert result.answer == ANSWER
                # Pub/sub delivers asynchronously, the workflow stream makes up what it has not yet:
                # the last attempt's deltas are all there when the answer is, in order.
                assert "".join(d.text for d in of_task(received, task_id) if d.attempt == 2) == ANSWER
                # The broker's own stream goes on delivering: the pieces it had not yet come now.
                iterated = [await asyncio.wait_for(stream.__anext__(), 30) for _ in of_task(received, task_id)]
            history = await client.history(task_id)
    finally:
        worker.terminate()
        worker.wait(15)
    deltas = of_task(received, task_id)
    assert [(d.attempt, d.seq, d.text) for d in iterated] == [(d.attempt, d.seq, d.text) for d in deltas]
    by_attempt = {a: [d for d in deltas if d.attempt == a] for a in (1, 2)}
    assert [d.seq for d in by_attempt[1]] == list(range(len(by_attempt[1]))) and by_attempt[1]
    assert [d.seq for d in by_attempt[2]] == list(range(8))  # every piece, in the order streamed
    assert {(d.call_id, d.kind) for d in deltas} == {("turn-1", "text")}
    assert ANSWER.startswith("".join(d.text for d in by_attempt[1]))  # the cut attempt's partial text
    # History has the one model call, its final response and each attempt's batch of pieces (its
    # workflow stream), nothing per delta.
    assert sum(1 for e in history if e.HasField("activity_task_scheduled_event_attributes")) == 1
    assert 2 <= sum(1 for e in history if e.HasField("workflow_execution_signaled_event_attributes")) <= 4


async def test_any_client_of_the_process_receives_an_in_process_workers_deltas(
    client: AsyncClient, host: HostConfig, content_store, task_queue: str, chat: FakeChatServer
):
    """No broker configured: a Client with a delta_sink in the worker's process gets the deltas
    and stops getting them once closed. The pieces go to the task's workflow stream either way (a
    reader may come later), never to the closed sink."""
    chat.reply(chunks_for(completion({"content": "in process"}), pieces=3))
    chat.reply(chunks_for(completion({"content": "not listened to"}), pieces=3))
    received: list[StreamDelta] = []
    provider = openai_for(chat, "openai-stream")
    async with build_worker(client.temporal, Registry.of(providers=[provider], content_store=content_store), task_queue):
        listener = await AsyncClient.connect(dataclasses.replace(host, delta_sink=received.append))
        task_id = await client.start("g", Options(provider="openai-stream"), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "in process"
        deltas = of_task(received, task_id)  # delivered as streamed: all there when the result is
        assert [d.seq for d in deltas] == [0, 1, 2] and "".join(d.text for d in deltas) == "in process"
        await listener.close()  # nobody listens any more
        second = await client.start("g", Options(provider="openai-stream"), task_queue=task_queue)
        assert (await client.result(second)).answer == "not listened to"
        history = await client.history(second)
    assert chat.seen[0].body.get("stream") is True and chat.seen[1].body.get("stream") is True
    assert of_task(received, second) == []
    assert [e for e in history if e.HasField("workflow_execution_signaled_event_attributes")]


def start_redis(port: int, workdir: Path) -> subprocess.Popen[bytes]:
    """A redis-server of the test's own (no persistence), returned once it accepts connections."""
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("redis-server did not start")


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
async def test_a_redis_restart_mid_stream_loses_no_piece_streamed_after_it(
    settings, content_store, data_dir: Path, tmp_path: Path, task_queue: str, chat: FakeChatServer
):
    """Worker and client both subscribe/publish again by themselves after Redis restarts: the
    pieces streamed after the restart all reach the client, in order, after those before it."""
    import redis.asyncio as redis

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = start_redis(port, tmp_path)
    go = threading.Event()
    full = chunks_for(completion({"content": ANSWER}), pieces=10)
    chat.reply([*full[:6], Pause(120, until=go), *full[6:]])  # held while Redis restarts
    pieces = [c["choices"][0]["delta"]["content"] for c in full if c["choices"] and c["choices"][0]["delta"].get("content")]
    before = [c["choices"][0]["delta"]["content"] for c in full[:6] if c["choices"] and c["choices"][0]["delta"].get("content")]
    env = {
        **os.environ, "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir),
        "NOETA_DELTA_BROKER": url, "NOETA_TEST_CHAT_URL": chat.base_url, "PYTHONPATH": str(ROOT),
    }
    worker = await asyncio.to_thread(start_worker, env, task_queue, "tests.support.registry:streaming_registry")
    received: list[StreamDelta] = []
    host = HostConfig(
        settings=settings.model_copy(update={"delta_broker_url": url}), content_store=content_store,
        delta_sink=received.append,
    )
    task_id = f"restart-{uuid.uuid4().hex[:10]}"
    try:
        async with await AsyncClient.connect(host) as client:
            await client.start("stream it", Options(provider="openai-stream"), task_id=task_id, task_queue=task_queue)
            await eventually(lambda: len(of_task(received, task_id)) == len(before), timeout=90)
            server.terminate()
            server.wait(15)
            server = start_redis(port, tmp_path)
            probe = redis.Redis.from_url(url)

            async def subscribed_again() -> bool:
                return int(await probe.pubsub_numpat()) >= 1  # the client's sink listens on a pattern

            # Margins for a loaded 2-core machine (the suite's other workers): 30 s timed out once.
            await eventually(subscribed_again, timeout=90)
            await probe.aclose()
            go.set()
            assert (await client.result(task_id)).answer == ANSWER
            await eventually(lambda: len(of_task(received, task_id)) == len(pieces), timeout=90)
    finally:
        go.set()
        worker.terminate()
        worker.wait(15)
        server.terminate()
        server.wait(15)
    deltas = of_task(received, task_id)
    assert [d.text for d in deltas] == pieces and [d.seq for d in deltas] == list(range(len(pieces)))


async def test_an_async_sink_that_raises_is_logged_and_the_next_pieces_still_reach_it(caplog):
    """As for a sync sink: one piece the consumer fails on does not stop the pieces after it."""
    from noeta.deltas.broker import InProcessBroker

    got: list[int] = []

    async def sink(delta: StreamDelta) -> None:
        if delta.seq == 1:
            raise RuntimeError("the consumer's socket closed")
        got.append(delta.seq)

    broker = InProcessBroker()
    subscription = await broker.subscribe("default", sink)
    for seq in range(3):
        broker.publish("default", StreamDelta(task_id="t", call_id="c", attempt=1, text=f"{seq}", seq=seq))
    await eventually(lambda: got == [0, 2], timeout=5)
    await subscription.close()
    assert "delta sink failed" in caplog.text and "socket closed" in caplog.text
