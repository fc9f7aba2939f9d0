"""Content-store retention on both backends: the bodies of tasks closed past the retention period
go; those of running tasks, of recently closed ones, shared with them, or stored by nobody's task
stay, and a running task carries on after a retention run."""

from __future__ import annotations

import asyncio
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
        conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_owner")


@pytest.fixture(params=["local", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RetainingStore]:
    if request.param == "local":
        yield LocalContentStore(tmp_path / "content")
    else:
        yield from postgres_store()


def tool_output(kb: int) -> bytes:
    result = big_output.invoke({"kb": kb}, ToolContext(task_id="t", call_id="c1", tool_name="big_output", attempt=1))
    return result.output.encode()


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

        # Closed just now: inside a one-day retention period, nothing goes.
        kept = await apply_retention(client.temporal, store, timedelta(days=1))
        assert (kept.released, kept.kept, kept.bodies_deleted) == ([], 2, 0)
        dry = await apply_retention(client.temporal, store, timedelta(0), dry_run=True)
        assert (dry.released, dry.bodies_deleted) == ([closed], 0)
        assert present(store, tool_output(6))

        report = await apply_retention(client.temporal, store, timedelta(0))
        assert (report.released, report.kept) == ([closed], 1)
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


async def test_retention_needs_an_owning_store_and_a_period(client: AsyncClient, tmp_path: Path):
    class Plain:
        def put(self, data: bytes, media_type: str = "text/plain"): ...

        def get(self, ref): ...

    with pytest.raises(ConfigurationError, match="does not record which task stored what"):
        await apply_retention(client.temporal, Plain(), timedelta(days=1))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="must not be negative"):
        await apply_retention(client.temporal, LocalContentStore(tmp_path), timedelta(days=-1))
