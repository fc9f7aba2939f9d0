"""Streaming inside a durable task: deltas reach the host's sink, history keeps the final response."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.errors import TaskCancelledError
from noeta.protocols.messages import StreamDelta
from noeta.sdk._query import aquery
from tests.support.chat_server import (
    FakeChatServer,
    Pause,
    chunks_for,
    completion,
    openai_for,
)
from tests.support.waiting import eventually


def provider_for(server: FakeChatServer):
    return openai_for(server, "openai-stream")


async def test_deltas_reach_the_sink_and_history_records_the_final_response(host: HostConfig, chat: FakeChatServer):
    chat.reply(chunks_for(completion({"content": "Durable streams are fun."}), pieces=4))
    deltas: list[StreamDelta] = []
    result = await aquery(
        Options(), goal="say it", provider=provider_for(chat), host=dataclasses.replace(host, delta_sink=deltas.append)
    )
    assert result.answer() == "Durable streams are fun."
    assert len(deltas) == 4 and "".join(d.text for d in deltas) == result.answer()
    assert {(d.task_id, d.call_id, d.attempt, d.kind) for d in deltas} == {(result.task_id, "turn-1", 1, "text")}
    assert chat.seen[0].body["stream"] is True
    [reply] = [e for e in result.events if e.type == "MessagesAppended" and e.actor == "provider:openai-stream"]
    assert reply.payload.messages[0].text == "Durable streams are fun."


async def test_a_retried_attempt_marks_its_deltas(host: HostConfig, chat: FakeChatServer):
    full = chunks_for(completion({"content": "second time lucky"}), pieces=3)
    chat.reply(full[:2], done=False)  # cut short: no finish reason, no [DONE]
    chat.reply(full)
    deltas: list[StreamDelta] = []
    result = await aquery(
        Options(), goal="g", provider=provider_for(chat), host=dataclasses.replace(host, delta_sink=deltas.append)
    )
    assert sorted({d.attempt for d in deltas}) == [1, 2]
    last_attempt = max(d.attempt for d in deltas)
    assert "".join(d.text for d in deltas if d.attempt == last_attempt) == result.answer() == "second time lucky"
    assert [e.payload.attempt for e in result.events if e.type == "ProviderCallRetried"] == [1]


async def test_cancelling_the_task_closes_the_stream(client: AsyncClient, content_store, task_queue, chat: FakeChatServer):
    from noeta.worker import Registry, build_worker

    chat.reply([*chunks_for(completion({"content": "never finished"}))[:2], Pause(60)], done=False)
    deltas: list[StreamDelta] = []
    provider = provider_for(chat)
    registry = Registry.of(providers=[provider], content_store=content_store)
    registry.delta_sink = deltas.append
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start("g", Options(provider="openai-stream"), task_queue=task_queue)
        await eventually(lambda: len(deltas) >= 1)
        await client.cancel(task_id)
        with pytest.raises(TaskCancelledError):
            await client.result(task_id)
        await asyncio.to_thread(chat.disconnected.wait, 30)  # reaches the stream through a heartbeat
    assert chat.disconnects == 1
