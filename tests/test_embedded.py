"""The embedded dev server: a task survives a server restart (database file under the data dir),
a second process adopts a running server instead of opening the same database, and the server
caches its search attributes once its database holds them all."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from noeta.client.client import AsyncClient, registered_search_attributes
from noeta.client.config import Settings
from noeta.client.connect import connect_temporal
from noeta.client.embedded import EmbeddedServer, free_port
from noeta.client.options import HostConfig, Options
from noeta.protocols.names import SEARCH_ATTRIBUTES
from noeta.sdk.testing import FakeLLMProvider
from noeta.temporal.search_attributes import STATUS, TURNS
from noeta.worker import Registry, build_worker
from tests.support.dev_server import make_older_release_database
from tests.support.scripts import say
from tests.support.server_metrics import scrape
from tests.support.waiting import eventually


async def first_goal_done(client: AsyncClient, task_id: str) -> bool:
    return any(e.type == "TaskCompleted" for e in await client.events(task_id))


@pytest.mark.server
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


@pytest.mark.server
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


async def reads_per_indexed_start(server: EmbeddedServer, metrics_port: int, starts: int = 10) -> float:
    """Cluster-metadata reads (where search attributes are kept) per workflow start that carries
    Noeta's search attributes, counted once the server has written the starts' visibility records
    (the last reads happen there, and the server reports its counters about once a second)."""
    # By address, so nothing registers attributes; connect_temporal retries while the new server's
    # frontend is still starting (it listens a moment before it serves).
    temporal, _ = await connect_temporal(Settings(temporal_address=server.address, home=server.data_dir.parent))
    before = await scrape(metrics_port)
    for _ in range(starts):
        await temporal.start_workflow(
            "NobodyRunsThis", id=f"indexed-{uuid.uuid4().hex}", task_queue="nobody-polls-this",
            search_attributes=TypedSearchAttributes([SearchAttributePair(STATUS, "running"), SearchAttributePair(TURNS, 0)]),
        )

    async def increase(operation: str) -> float:
        return (await scrape(metrics_port)).get(operation, 0.0) - before.get(operation, 0.0)

    async def recorded() -> bool:
        return await increase("visibility_persistence_requests:RecordWorkflowExecutionStarted") >= starts

    await eventually(recorded)
    return await increase("persistence_requests:GetCurrentClusterMetadata") / starts


@pytest.mark.server
async def test_a_new_database_lets_the_server_cache_its_search_attributes(tmp_path: Path):
    """The dev server re-reads search attributes on every request unless told not to; the
    embedded server registers all of Noeta's at creation, so it turns that off."""
    port = free_port()
    server = EmbeddedServer(tmp_path / "temporal", headless=True, extra_args=("--metrics-port", str(port))).start()
    try:
        assert server.holds_search_attributes()
        assert await reads_per_indexed_start(server, port) < 0.5
    finally:
        server.stop()


@pytest.mark.server
async def test_an_older_database_is_re_read_until_its_attributes_are_complete(tmp_path: Path):
    """A database made before the marker file existed (or lacking later attributes) keeps the dev
    server's re-reading, so attributes the client adds are usable at once; once the client has
    added them, the next start caches."""
    await make_older_release_database(tmp_path)
    data, metrics_port = tmp_path / "temporal", free_port()
    server = EmbeddedServer(data, headless=True, extra_args=("--metrics-port", str(metrics_port))).start()
    try:
        assert not server.holds_search_attributes()
        assert await reads_per_indexed_start(server, metrics_port) >= 1
        temporal, _ = await connect_temporal(Settings(temporal_address=None, home=tmp_path))
        assert await registered_search_attributes(temporal) == set(SEARCH_ATTRIBUTES)
        assert server.holds_search_attributes()
    finally:
        server.stop()

    server = EmbeddedServer(data, headless=True, extra_args=("--metrics-port", str(metrics_port))).start()
    try:
        assert await reads_per_indexed_start(server, metrics_port) < 0.5
    finally:
        server.stop()
