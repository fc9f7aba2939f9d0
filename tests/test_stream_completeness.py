"""Streams that end where the answer ends, read without writing (issue 45, "Streams"):

- docs/streaming.md's example, run as written with the worker in another process, prints every
  piece before the line after ``result()``; a program whose delta_sink is set and that exits right
  after ``result()`` has every piece;
- a reader that joins after the task ended gets every piece with ``after=None`` and with
  ``after=<first offset>`` (offsets are inclusive), the rest with ``after=<a delta>``; bad ``after``
  values are refused with their exact errors;
- reading a task's stream (``/deltas``, ``Client.deltas``, the console's reads) adds no event to its
  history;
- a call whose end mark is missing from the stream is named in a warning when the answer comes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.http.app import create_app
from noeta.protocols.messages import StreamDelta
from noeta.protocols.names import SIGNAL_STREAM_BATCH
from noeta.protocols.stream_batches import CallPieces, batch_body
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.chat_server import FakeChatServer, chunks_for, completion, openai_for
from tests.support.asgi import serving
from tests.support.processes import ROOT, start_worker
from tests.support.scripts import say

PIECES = 40
ANSWER = ("Raft elects a leader, replicates a log, and commits entries once a majority has them. " * 4)[: PIECES * 8]


def example_code() -> str:
    """The first Python block of docs/streaming.md, as written."""
    text = (ROOT / "docs" / "streaming.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]


def content_pieces(chunks: list) -> list[str]:
    return [c["choices"][0]["delta"]["content"] for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]


@pytest.fixture
def worker_process(settings, data_dir: Path, task_queue: str, chat: FakeChatServer):
    """A worker subprocess serving "anthropic" (the example's provider) from the test's chat server,
    and the environment a script needs to reach it."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "NOETA_DELTA_BROKER"},
        "TEMPORAL_ADDRESS": settings.temporal_address, "NOETA_HOME": str(data_dir), "NOETA_TASK_QUEUE": task_queue,
        "NOETA_TEST_CHAT_URL": chat.base_url, "PYTHONPATH": str(ROOT),
    }
    worker = start_worker(env, task_queue, "tests.support.registry:anthropic_named_registry")
    try:
        yield env
    finally:
        worker.terminate()
        worker.wait(15)


def run_script(code: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_the_documented_example_prints_every_piece_before_the_answer(worker_process, chat: FakeChatServer):
    chunks = chunks_for(completion({"content": ANSWER}), pieces=PIECES)
    chat.reply(chunks)
    out = await asyncio.to_thread(run_script, example_code(), worker_process)
    printed, _, done = out.partition("\n\nDone:")
    assert len(content_pieces(chunks)) == PIECES
    assert printed == ANSWER  # all 40 pieces, in order, before the line after result()
    assert done.strip() == f"{len(ANSWER)} characters"


EXITS_AT_ONCE = """
import sys
from noeta.sdk import Client, HostConfig, Options
pieces = []
client = Client(HostConfig(delta_sink=pieces.append))
result = client.result(client.start("go", Options(provider="anthropic")))
print(len(pieces), repr("".join(d.text for d in pieces)), pieces[-1].final, flush=True)
sys.exit(0)
"""


async def test_a_program_that_exits_right_after_result_has_every_piece(worker_process, chat: FakeChatServer):
    chat.reply(chunks_for(completion({"content": ANSWER}), pieces=PIECES))
    out = await asyncio.to_thread(run_script, EXITS_AT_ONCE, worker_process)
    assert out.strip() == f"{PIECES} {ANSWER!r} True"


async def test_a_reader_after_the_end_gets_every_piece_from_none_or_the_first_offset(
    client: AsyncClient, content_store, task_queue: str, chat: FakeChatServer
):
    chunks = chunks_for(completion({"content": ANSWER}), pieces=PIECES)
    chat.reply(chunks)
    registry = Registry.of(providers=[openai_for(chat, "openai-late")], content_store=content_store)
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start("go", Options(provider="openai-late"), task_queue=task_queue)
        await client.result(task_id)
    # The worker is gone: the stream is read from history alone.
    everything = [d async for d in await client.deltas(task_id)]
    first = everything[0].offset
    from_first = [d async for d in await client.deltas(task_id, after=first)]
    rest = [d async for d in await client.deltas(task_id, after=everything[9])]
    assert [d.text for d in everything] == content_pieces(chunks) and first == 0
    assert from_first == everything
    assert rest == everything[10:]
    assert [d.final for d in everything].count(True) == 1 and everything[-1].final
    with pytest.raises(TypeError):
        await client.deltas(task_id, after="0")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await client.deltas(task_id, after=StreamDelta(task_id=task_id, call_id="turn-1", attempt=1))  # a broker's: no offset


async def history_length(client: AsyncClient, task_id: str) -> int:
    return len(await client.history(task_id))


async def read_sse_until_end(http: httpx.AsyncClient, path: str, seconds: float) -> list[str]:
    """The lines of an SSE response until its ``end`` event or ``seconds``, whichever first."""
    lines: list[str] = []

    async def read() -> None:
        async with http.stream("GET", path) as response:
            async for line in response.aiter_lines():
                lines.append(line)
                if line == "event: end":
                    return

    try:
        await asyncio.wait_for(read(), seconds)
    except TimeoutError:
        pass
    return lines


async def test_reading_a_tasks_streams_adds_nothing_to_its_history(
    client: AsyncClient, content_store, task_queue: str, chat: FakeChatServer
):
    """A keep-open task, idle after its first goal (so nothing else changes its history), read
    every way a reader reads it: the console's requests (the task, its events and deltas
    followed), ``Client.deltas``, a delta_sink following it."""
    chat.reply(chunks_for(completion({"content": "first"}), pieces=1))
    chat.reply(chunks_for(completion({"content": ANSWER}), pieces=PIECES))
    registry = Registry.of(providers=[openai_for(chat, "openai-read")], content_store=content_store)
    app = create_app(client, keepalive_seconds=0.2)
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start("go", Options(provider="openai-read"), task_queue=task_queue, keep_open=True)
        await client.send_goal(task_id, "again")  # then the task waits for its next goal
        before = await history_length(client, task_id)
        async with serving(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
            assert (await http.get("/")).status_code == 200  # the console page
            for path in ("", "/approvals", "/messages", "/audit"):  # what the console's task page gets
                assert (await http.get(f"/tasks/{task_id}{path}")).status_code == 200, path
            events = await read_sse_until_end(http, f"/tasks/{task_id}/events?follow=true", 3)
            deltas = await read_sse_until_end(http, f"/tasks/{task_id}/deltas", 3)
        stream = await client.deltas(task_id)
        got = [await asyncio.wait_for(stream.__anext__(), 30) for _ in range(PIECES + 1)][1:]
        await stream.close()
        sink: list[StreamDelta] = []
        async with AsyncClient(client.temporal, content_store=content_store, task_queue=task_queue) as follower:
            await follower._deltas.open(sink.append)
            follower._deltas.follow(task_id)
            await asyncio.wait_for(follower._deltas.settle(task_id), 30)
        after = await history_length(client, task_id)
        await client.close_task(task_id)
    assert "".join(d.text for d in got) == ANSWER and "".join(d.text for d in sink) == "first" + ANSWER
    assert sum(1 for line in deltas if line == "event: delta") == PIECES + 1 and any(line.startswith("event: ") for line in events)
    assert after == before


async def test_a_call_without_its_end_mark_is_named_when_the_answer_comes(
    client: AsyncClient, content_store, task_queue: str, caplog: pytest.LogCaptureFixture
):
    """A batch whose attempt never sent its end (as a lost worker leaves it) makes send_goal warn."""
    provider = FakeLLMProvider(responder=lambda request: say("ok"))
    registry = Registry.of(providers={"plain": provider}, content_store=content_store)
    sink: list[StreamDelta] = []
    async with build_worker(client.temporal, registry, task_queue):
        async with AsyncClient(client.temporal, content_store=content_store, task_queue=task_queue) as reader:
            await reader._deltas.open(sink.append)
            task_id = await reader.start("first", Options(provider="plain"), task_queue=task_queue, keep_open=True)
            cut = batch_body("lost-worker", 1, CallPieces("turn-7", 2, 0, [("text", "half an ans")]))
            await client.temporal.get_workflow_handle(task_id).signal(SIGNAL_STREAM_BATCH, cut)
            with caplog.at_level(logging.WARNING, logger="noeta.client.deltas"):
                await reader.send_goal(task_id, "second")
            await reader.close_task(task_id)
    assert [d.text for d in sink] == ["half an ans"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "noeta.client.deltas"]
    assert any("turn-7 (attempt 2)" in w and task_id in w for w in warnings), warnings

