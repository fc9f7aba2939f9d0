"""Content-store retention on both backends: the bodies of tasks closed past the retention period
go; those of running tasks, of recently closed ones, shared with them, or stored by nobody's task
stay, and a running task carries on after a retention run."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import HostConfig, Options
from noeta.client.retention import apply_retention
from noeta.context.content_store import (
    ContentNotFoundError,
    LocalContentStore,
    Released,
    RetainingStore,
    content_hash,
)
from noeta.context.ownership import owned_by
from noeta.context.step_records import LocalStepRecords, StepOutputs, stored_step_records
from noeta.errors import ConfigurationError
from noeta.protocols.tool import ToolContext
from noeta.sdk.images import image
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.postgres import DSN, require_postgres
from tests.support.scripts import call, say
from tests.support.tools import big_output

PNG = b"\x89PNG\r\n\x1a\n" + b"retention test image"
SHARED_PROMPT = "Shared instructions for retention tests. " * 20


def postgres_store() -> Iterator[RetainingStore]:
    require_postgres()
    import psycopg

    from noeta.context.postgres_store import PostgresContentStore

    table = f"noeta_retention_{uuid.uuid4().hex[:8]}"
    yield PostgresContentStore(DSN, table=table)
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_owner, {table}_steps")


@pytest.fixture(params=["local", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RetainingStore]:
    if request.param == "local":
        yield LocalContentStore(tmp_path / "content")
    else:
        yield from postgres_store()


def tool_output(kb: int) -> bytes:
    result = big_output.invoke({"kb": kb}, ToolContext(task_id="t", call_id="c1", tool_name="big_output", attempt=1))
    return result.output.encode()


async def step_keys(client: AsyncClient, task_id: str, *steps: str) -> list[str]:
    run_id = (await client.temporal.get_workflow_handle(task_id).describe()).run_id
    return [f"{task_id}/{run_id}/{step}" for step in steps]


def recorded(store: RetainingStore, keys: list[str]) -> list[bool]:
    records = stored_step_records(store)
    assert records is not None
    return [StepOutputs(records, store).get(key) is not None for key in keys]


def present(store: RetainingStore, data: bytes) -> bool:
    try:
        return store.get(content_hash(data)) == data
    except ContentNotFoundError:
        return False


async def test_retention_deletes_only_what_old_closed_tasks_alone_own(store, settings, task_queue):
    client = await AsyncClient.connect(HostConfig(settings=settings, content_store=store))
    closed_provider = FakeLLMProvider(responses=[call(("c1", "big_output", {"kb": 6})), say("done")])
    open_provider = FakeLLMProvider(
        responses=[call(("c1", "big_output", {"kb": 7})), say("first"), say("second"), say("third")]
    )
    registry = Registry.of(tools=[big_output], providers={"closed": closed_provider, "open": open_provider}, content_store=store)
    unowned = store.put(b"stored outside any task")
    async with build_worker(client.temporal, registry, task_queue):
        options = dict(system_prompt=SHARED_PROMPT, allowed_tools=[big_output])
        closed = await client.start("a", Options(provider="closed", **options), task_queue=task_queue)
        assert (await client.result(closed)).answer == "done"
        picture = image(PNG, "image/png", content_store=store)
        running = await client.start(
            "b", Options(provider="open", **options), keep_open=True, images=[picture], task_queue=task_queue
        )
        assert (await client.send_goal(running, "b2")).answer == "second"  # after the first goal
        assert set(store.tasks()) == {closed, running}
        # Finished steps are recorded under their keys: two model calls and one tool call each.
        closed_steps = await step_keys(client, closed, "model-1", "1", "model-2")
        running_steps = await step_keys(client, running, "model-1", "1", "model-2")
        assert recorded(store, closed_steps + running_steps) == [True] * 6

        # Closed just now: inside a one-day retention period, nothing goes.
        kept = await apply_retention(client.temporal, store, timedelta(days=1))
        assert (kept.released, kept.kept, kept.bodies_deleted) == ([], 2, 0)
        dry = await apply_retention(client.temporal, store, timedelta(0), dry_run=True)
        assert (dry.released, dry.bodies_deleted) == ([closed], 0)
        assert present(store, tool_output(6))

        report = await apply_retention(client.temporal, store, timedelta(0))
        assert (report.released, report.kept, report.step_records_deleted) == ([closed], 1, 3)
        assert recorded(store, closed_steps) == [False] * 3  # they pointed at deleted bodies
        assert recorded(store, running_steps) == [True] * 3
        assert report.bodies_deleted >= 2 and report.bytes_deleted >= 6 * 1024  # its output, its transcript
        assert not present(store, tool_output(6))
        assert present(store, tool_output(7)) and present(store, PNG)  # the running task's
        assert present(store, SHARED_PROMPT.encode())  # shared with the running task
        assert store.get(unowned) == b"stored outside any task"
        assert set(store.tasks()) == {running}

        # The running task still has its whole transcript.
        assert (await client.send_goal(running, "b3")).answer == "third"
        await client.close_task(running)
        await client.result(running)

    final = await apply_retention(client.temporal, store, timedelta(0))
    assert final.released == [running]
    assert final.step_records_deleted == 5  # model-1, 1, model-2 and the later goals' model-3, model-4
    assert recorded(store, running_steps) == [False] * 3
    assert not present(store, tool_output(7)) and not present(store, PNG)
    assert not present(store, SHARED_PROMPT.encode())
    assert store.get(unowned) == b"stored outside any task"
    assert store.tasks() == {}


async def test_a_task_temporal_never_knew_is_released_after_its_last_store(store, client: AsyncClient):
    ghost = f"never-started-{uuid.uuid4().hex[:8]}"
    with owned_by(ghost):
        ref = store.put(b"only the ghost task stored this")
    assert (await apply_retention(client.temporal, store, timedelta(hours=1))).released == []
    report = await apply_retention(client.temporal, store, timedelta(0))
    assert (report.released, report.bodies_deleted) == ([ghost], 1)
    with pytest.raises(ContentNotFoundError):
        store.get(ref)


async def test_a_body_stored_again_after_the_cutoff_is_kept(store):
    """The fence against a running task storing the same bytes while retention runs."""
    ghost = f"closed-{uuid.uuid4().hex[:8]}"
    with owned_by(ghost):
        stale = store.put(b"stored once, long ago")
        again = store.put(b"stored again during the retention run")
    await asyncio.sleep(0.05)  # file timestamps may use a coarse clock
    cutoff = datetime.now(timezone.utc)
    await asyncio.sleep(0.05)
    store.put(b"stored again during the retention run")
    assert store.release([ghost], stored_before=cutoff) == Released(bodies=1, bytes=len(b"stored once, long ago"))
    with pytest.raises(ContentNotFoundError):
        store.get(stale)
    assert store.get(again) == b"stored again during the retention run"


def test_step_records_from_before_they_were_filed_by_task_are_released(store):
    """Records an older release wrote without their task: PostgreSQL files them by the task in the
    key; a local store's (keyed by hash alone) go once older than the cutoff."""
    records = stored_step_records(store)
    assert records is not None
    ref = store.put(b"a recorded step output")
    keys = {"old": "old-task/run-1/model-1", "recent": "recent-task/run-2/1", "odd": "not-a-step-key"}
    if isinstance(records, LocalStepRecords):
        for name, key in keys.items():
            path = records._unfiled_path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(json.dumps({"hash": ref.hash, "size": ref.size, "media_type": ref.media_type}).encode())
            if name != "recent":
                os.utime(path, (time.time() - 3600, time.time() - 3600))
    else:
        import psycopg

        with psycopg.connect(DSN, autocommit=True) as conn:
            for key in keys.values():
                conn.execute(f"INSERT INTO {records.table} (key, ref) VALUES (%s, %s)",
                             (key, json.dumps({"hash": ref.hash, "size": ref.size, "media_type": ref.media_type})))
    assert [records.get(key) for key in keys.values()] == [ref] * 3  # still read where they are
    records.put(keys["old"], store.put(b"another output"))  # the first record of a key wins
    assert records.get(keys["old"]) == ref

    cutoff = datetime.now(timezone.utc) - timedelta(minutes=1)
    deleted = records.release(["old-task", "recent-task"], stored_before=cutoff)
    if isinstance(records, LocalStepRecords):  # by age: the old one and the unfiled odd key
        assert (deleted, [records.get(k) for k in keys.values()]) == (2, [None, ref, None])
    else:  # by task, found in the key; a key naming no task stays
        assert (deleted, [records.get(k) for k in keys.values()]) == (2, [None, None, ref])
    # Filed records go by task, whatever their age.
    records.put("new-task/run-3/model-1", ref)
    assert records.release(["new-task"], stored_before=cutoff) == 1
    assert records.get("new-task/run-3/model-1") is None


async def test_retention_needs_an_owning_store_and_a_period(client: AsyncClient, tmp_path: Path):
    class Plain:
        def put(self, data: bytes, media_type: str = "text/plain"): ...

        def get(self, ref): ...

    with pytest.raises(ConfigurationError, match="does not record which task stored what"):
        await apply_retention(client.temporal, Plain(), timedelta(days=1))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="must not be negative"):
        await apply_retention(client.temporal, LocalContentStore(tmp_path), timedelta(days=-1))
