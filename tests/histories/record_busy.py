"""Record the histories of goals sent to a busy task (``if_busy``) and of a thread started by
``Client.send`` (Update-with-Start), for the replay tests:

    python -m tests.histories.record_busy

Writes tests/histories/busy-goals/{interrupt,steer,thread}.json. As for record.py: only to ADD
histories, never to re-record one that fails to replay.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.histories.record import run_histories
from tests.histories.recording import recording_client
from tests.test_busy_goals import Held, answer, started_tool

INTO = Path(__file__).parent / "busy-goals"


async def interrupt(client: AsyncClient, provider: FakeLLMProvider, held: Held) -> str:
    task_id = await client.start("work on account A", Options(provider=provider, allowed_tools=[held.tool()]),
                                 keep_open=True)
    await started_tool(client, task_id)
    await client.send_goal(task_id, "no, account B", if_busy="interrupt")
    await client.close_task(task_id)
    await client.result(task_id)
    return task_id


async def steer(client: AsyncClient, provider: FakeLLMProvider, held: Held) -> str:
    task_id = await client.start("work on account A", Options(provider=provider, allowed_tools=[held.tool()]),
                                 keep_open=True)
    await started_tool(client, task_id)
    steering = asyncio.ensure_future(client.send_goal(task_id, "mention the invoice too", if_busy="steer"))
    await asyncio.sleep(1.0)
    held.release.set()
    await steering
    await client.close_task(task_id)
    await client.result(task_id)
    return task_id


async def thread(client: AsyncClient, provider: FakeLLMProvider, held: Held) -> str:
    options = Options(provider=provider)
    await client.send("thread-recorded", "hello", options, request_id="req-1")
    await client.send("thread-recorded", "and then?", options, request_id="req-2")
    await client.close_task("thread-recorded")
    await client.result("thread-recorded")
    return "thread-recorded"


async def main() -> None:
    INTO.mkdir(exist_ok=True)
    async with recording_client() as (_, client, store):
        for scenario in (interrupt, steer, thread):
            held, provider = Held(), FakeLLMProvider(responder=answer)
            registry = Registry.of(tools=[held.tool()], providers=[provider], content_store=store)
            async with build_worker(client.temporal, registry, client.task_queue):
                task_id = await scenario(client, provider, held)
                (history,) = await run_histories(client, task_id)
                (INTO / f"{scenario.__name__}.json").write_text(history.to_json())
                print(f"recorded {scenario.__name__}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
