"""Live events: follow yields envelopes as they happen; observers see each envelope once, in order."""

from __future__ import annotations

import asyncio
import threading

from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.client.wire import envelope_to_dict
from noeta.protocols.tool import ToolResult
from noeta.sdk._query import aquery
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from tests.support.scripts import call, say


async def test_follow_streams_a_live_task(client: AsyncClient, serve, task_queue):
    release = threading.Event()

    @tool(name="gate", version="1", input_schema={"type": "object"})
    def gate(arguments, ctx):
        assert release.wait(30)
        return ToolResult(success=True, output="open")

    provider = FakeLLMProvider(responses=[call(("c1", "gate", {})), say("through")])
    async with serve(tools=[gate], providers=[provider]):
        task_id = await client.start("go", Options(provider=provider, allowed_tools=[gate]), task_queue=task_queue)
        seen: list[str] = []
        async for env in client.events(task_id, follow=True):
            seen.append(env.type)
            if env.type == "ToolCallStarted":
                assert not release.is_set()  # streamed while the task is still running
                release.set()
    assert seen[-1] == "TaskCompleted"
    everything = await client.events(task_id)
    assert [e.type for e in everything] == seen
    tail = await client.events(task_id, after_seq=len(seen) - 2)
    assert [e.seq for e in tail] == [len(seen) - 1, len(seen)]


async def test_observers_get_every_envelope_once_in_order(host: HostConfig):
    got: list[int] = []
    async_got: list[int] = []

    def broken(env):
        raise RuntimeError("observers cannot break a task")

    async def async_observer(env):
        async_got.append(env.seq)

    provider = FakeLLMProvider(responses=[say("observed")])
    result = await aquery(
        Options(observers=[lambda env: got.append(env.seq), broken, async_observer]),
        goal="watch me",
        provider=provider,
        host=host,
    )
    assert got == async_got == [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    assert [envelope_to_dict(e)["type"] for e in result.events][-1] == "TaskCompleted"


def test_sync_client_follows_events(host: HostConfig, client: AsyncClient, content_store, task_queue):
    # A worker on its own loop in a thread; the sync client iterates envelopes live.
    from noeta.worker import Registry, build_worker

    provider = FakeLLMProvider(responses=[say("sync follow")])
    ready, stop = threading.Event(), threading.Event()

    def worker_thread() -> None:
        async def main() -> None:
            worker_client = await AsyncClient.connect(host)
            registry = Registry.of(providers=[provider], content_store=content_store)
            async with build_worker(worker_client.temporal, registry, task_queue):
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.05)

        asyncio.run(main())

    thread = threading.Thread(target=worker_thread)
    thread.start()
    try:
        assert ready.wait(30)
        from noeta.client.sync import Client

        sync = Client(host)
        try:
            task_id = sync.start("hello", Options(provider=provider), task_queue=task_queue)
            types = [env.type for env in sync.events(task_id, follow=True)]
        finally:
            sync.shutdown()
    finally:
        stop.set()
        thread.join(30)
    assert types[0] == "TaskCreated" and types[-1] == "TaskCompleted"
