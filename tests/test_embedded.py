"""The embedded dev server: a task survives a server restart (database file under the data dir),
and a second process adopts a running server instead of opening the same database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.embedded import EmbeddedServer
from noeta.client.options import HostConfig, Options
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.scripts import say
from tests.support.waiting import eventually


async def first_goal_done(client: AsyncClient, task_id: str) -> bool:
    return any(e.type == "TaskCompleted" for e in await client.events(task_id))


async def test_task_survives_a_server_restart(tmp_path: Path):
    provider = FakeLLMProvider(responses=[say("before restart"), say("after restart")])
    host = HostConfig(settings=Settings(temporal_address=None, home=tmp_path, task_queue="restart"))
    server = EmbeddedServer(tmp_path / "temporal", headless=True).start()
    try:
        client = await AsyncClient.connect(HostConfig(settings=Settings(temporal_address=server.address, home=tmp_path)))
        registry = Registry.of(providers=[provider], content_store=host.store())
        async with build_worker(client.temporal, registry, "restart"):
            task_id = await client.start("first", Options(provider=provider), keep_open=True, task_queue="restart")
            await eventually(lambda: first_goal_done(client, task_id))
    finally:
        server.stop()

    server = EmbeddedServer(tmp_path / "temporal", headless=True).start()  # same database file
    try:
        client = await AsyncClient.connect(HostConfig(settings=Settings(temporal_address=server.address, home=tmp_path)))
        async with build_worker(client.temporal, registry, "restart"):
            second = await client.send_goal(task_id, "second")
            await client.close_task(task_id)
            assert (await client.result(task_id)).answer == "after restart"
    finally:
        server.stop()
    assert second.answer == "after restart"
    assert [r.messages[-1].text for r in provider.received_requests] == ["first", "second"]


def test_second_process_adopts_the_running_server(tmp_path: Path):
    server = EmbeddedServer(tmp_path / "temporal", headless=True).start()
    try:
        code = (
            "from pathlib import Path; from noeta.client.embedded import ensure_server; "
            f"s = ensure_server(Path({str(tmp_path / 'temporal')!r})); print(s.address, s.owned)"
        )
        env = {k: v for k, v in os.environ.items() if k != "TEMPORAL_ADDRESS"}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
        assert out.split() == [server.address, "False"]
    finally:
        server.stop()
    assert not (tmp_path / "temporal" / "server.json").exists()
