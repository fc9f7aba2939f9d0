"""Keys that fail loudly: a client or a worker without a task's payload key says which key, at once.

Real tasks on the dev server, encrypted with key ``v1``; then read by a client without keys or with
only another key, and run by a worker without keys or with only another key, then by one that has
``v1`` (the key deployed): the task goes on with nothing lost.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.config import Settings
from noeta.client.options import HostConfig, Options
from noeta.context.content_store import LocalContentStore
from noeta.errors import EncryptionKeyError
from noeta.cli.progress import Progress
from noeta.client import pollers
from noeta.cli.render import render_envelope
from noeta.protocols.event_log import EventEnvelope
from noeta.protocols.events_task import TaskStalled
from noeta.security.codec import EncryptionCodec
from noeta.security.keys import KeyRing, new_key_entry
from noeta.security.sealed_bodies import BodyCipher
from noeta.worker import Registry, build_worker
from tests.support.waiting import eventually
from tests.test_encryption import ANSWER, GOAL, ledger_lookup, plain_provider, ring, run_task


def stall_notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "noeta.client" and "is stalled" in r.getMessage()]


def host(settings: Settings, store_dir: Path, keys: KeyRing | None) -> HostConfig:
    cipher = BodyCipher(keys) if keys is not None else None
    codec = EncryptionCodec(keys) if keys is not None else None
    return HostConfig(settings=settings, content_store=LocalContentStore(store_dir, cipher=cipher), codec=codec)


async def test_a_client_without_keys_names_the_key_at_once(settings: Settings, tmp_path: Path, task_queue: str):
    task_id, _ = await run_task(settings, tmp_path / "content", ring(new_key_entry("v1")), task_queue)
    async with await AsyncClient.connect(host(settings, tmp_path / "content", None)) as keyless:
        for read in (keyless.result, keyless.events, keyless.messages):
            with pytest.raises(EncryptionKeyError, match="encrypted with key 'v1'.*NOETA_ENCRYPTION_KEYS") as err:
                await read(task_id)
            assert err.value.key_id == "v1", read
        described = await keyless.describe(task_id)
        assert isinstance(described.error, EncryptionKeyError) and described.error.key_id == "v1"
    async with await AsyncClient.connect(host(settings, tmp_path / "content", ring(new_key_entry("v2")))) as dropped:
        for read in (dropped.result, dropped.events, dropped.messages):
            with pytest.raises(EncryptionKeyError, match="'v1'") as err:
                await read(task_id)
            assert err.value.key_id == "v1", read
        described = await dropped.describe(task_id)
        assert isinstance(described.error, EncryptionKeyError) and described.error.key_id == "v1"


@pytest.mark.parametrize("worker_keys", ["none", "another key"])
async def test_a_worker_without_the_key_shows_it_on_the_task_and_the_task_resumes_with_the_key(
    settings: Settings, tmp_path: Path, task_queue: str, worker_keys: str,
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
):
    store_dir = tmp_path / "content"
    v1 = ring(new_key_entry("v1"))
    lacking = None if worker_keys == "none" else ring(new_key_entry("v2"))
    async with await AsyncClient.connect(host(settings, store_dir, v1)) as client:
        task_id = await client.start(GOAL, Options(provider="fake", allowed_tools=["ledger_lookup"]), task_queue=task_queue)

        # A worker that cannot open the task: within one workflow task, the task says why.
        async with await AsyncClient.connect(host(settings, store_dir, lacking)) as wrong:
            registry = Registry.of(tools=[ledger_lookup], providers={"fake": plain_provider()}, content_store=wrong.content_store)
            async with build_worker(wrong.temporal, registry, task_queue):
                found: list[EventEnvelope] = []

                async def stalled() -> bool:
                    found[:] = [e for e in await client.events(task_id) if isinstance(e.payload, TaskStalled)]
                    return bool(found)

                await eventually(stalled, timeout=10)
                details = await client.current_details(task_id)
                # A client waiting for the result says so too (and keeps waiting).
                monkeypatch.setattr(pollers, "FIRST_LOOK_SECONDS", 0.2)
                monkeypatch.setattr(pollers, "LOOK_EVERY_SECONDS", 0.5)  # a stall is told from the second look
                caplog.set_level(logging.WARNING, logger="noeta.client")
                waiting = asyncio.ensure_future(client.result(task_id))
                await eventually(lambda: stall_notices(caplog), timeout=15)
                assert not waiting.done()
        stall = found[0].payload
        assert stall.error_type == "EncryptionKeyError" and stall.key_id == "v1"
        assert "'v1'" in stall.message
        assert "EncryptionKeyError" in details and "'v1'" in details
        [notice] = stall_notices(caplog)
        assert notice.startswith(f"task {task_id} is stalled: a worker could not run the next step: EncryptionKeyError:")
        assert "'v1'" in notice and notice.endswith("still waiting (it goes on once a worker can run it)")
        # The CLI's log and progress lines say it too.
        assert "EncryptionKeyError" in render_envelope(found[0]) and "'v1'" in render_envelope(found[0])
        assert any("EncryptionKeyError" in line for line in Progress().lines(found[0]))

        # The key deployed: a worker that has it runs the task to the end, nothing lost.
        registry = Registry.of(tools=[ledger_lookup], providers={"fake": plain_provider()}, content_store=client.content_store)
        async with build_worker(client.temporal, registry, task_queue):
            result = await asyncio.wait_for(waiting, 60)
        assert result.answer == ANSWER
        types = [e.type for e in await client.events(task_id)]
        assert types.count("TaskStalled") == 1 and types.count("ToolCallCompleted") == 1 and types[-1] == "TaskCompleted"
