"""Record the histories of a versioned keep_open task that moves to a new current version at an
idle point (PATCH_VERSION_UPGRADE), for the replay tests:

    python -m tests.histories.record_versions

Two in-process workers of one deployment (builds a and b). The task answers a goal on a, idles
(its version-check timer fires), a worker of b starts and b becomes current, it continues as new onto b and answers its
next goal there. Writes tests/histories/version-upgrade/keep_open_moves.run{1,2}.json. As for
record.py: only to ADD histories, never to re-record one that fails to replay.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from noeta.client.options import Options
from noeta.config.deployment import DeploymentSettings
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.histories.record import run_histories
from tests.histories.recording import recording_client
from tests.support.rollout.deployments import set_current
from tests.support.scripts import say

INTO = Path(__file__).parent / "version-upgrade"


async def main() -> None:
    INTO.mkdir(exist_ok=True)
    async with recording_client() as (server, client, store):
        provider = FakeLLMProvider(responder=lambda request: say(f"answer to {request.messages[-1].text}"))
        registry = Registry.of(providers=[provider], content_store=store)
        async with contextlib.AsyncExitStack() as workers:

            async def serve(build: str) -> None:
                deployment = DeploymentSettings(deployment="recorded", build_id=build, upgrade_check_seconds=1)
                worker = build_worker(client.temporal, registry, client.task_queue, deployment=deployment)
                await workers.enter_async_context(worker)
                await asyncio.to_thread(set_current, server.address, "recorded", build)

            await serve("a")
            task_id = await client.start("hello", Options(provider=provider), keep_open=True)
            await client.send_goal(task_id, "first")
            await asyncio.sleep(2.5)  # two version checks on a
            await serve("b")
            await asyncio.sleep(3)
            await client.send_goal(task_id, "second")
            await client.close_task(task_id)
            await client.result(task_id)
            for n, history in enumerate(await run_histories(client, task_id), start=1):
                (INTO / f"keep_open_moves.run{n}.json").write_text(history.to_json())
                print(f"recorded run {n}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())
