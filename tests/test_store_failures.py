"""The content store failing under a running task, on real components: a full filesystem (a small
tmpfs), PostgreSQL cut off (a proxy in front of the shared server), a body altered or deleted
where it is stored. A finished tool never runs again because its output could not be stored; a
body is never served unless it matches its hash; each failure is the typed error that names it."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from noeta.client.client import AsyncClient
from noeta.client.options import Options
from noeta.protocols.interaction import TaskResult
from noeta.context.content_store import ContentNotFoundError, LocalContentStore
from noeta.context.ownership import owned_by
from noeta.context.postgres_store import PostgresContentStore
from noeta.context.store_failures import failure_cause
from noeta.errors import (
    ContentIntegrityError,
    ContentMissingError,
    ContentStoreError,
    EncryptionKeyError,
    rebuild_error,
)
from noeta.protocols.names import SIGNAL_STORE_OUTAGE
from noeta.protocols.tool import ToolContext, ToolResult
from noeta.sdk.testing import FakeLLMProvider
from noeta.sdk.tools import tool
from noeta.security.keys import parse_keys
from noeta.security.sealed_bodies import BodyCipher
from noeta.worker import Registry, build_worker
from tests.support.postgres import DSN, require_postgres
from tests.support.replay import replay
from tests.support.scripts import call, say
from tests.support.tcp_proxy import running_proxy
from tests.support.waiting import eventually

RUNS: list[str] = []


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs of this test's own, unmounted afterwards (skipped where mounting is not
    permitted: it needs root)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a small tmpfs cannot be mounted here (mounting needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=True)


class WatchedStore(LocalContentStore):
    """A local store that tells the test when a write has failed."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.failed = threading.Event()

    def put(self, data: bytes, media_type: str = "text/plain"):
        try:
            return super().put(data, media_type)
        except ContentStoreError:
            self.failed.set()
            raise


@tool(name="big_output", version="1", input_schema={"type": "object"}, description="Returns MBs; counts its runs.")
async def big_output(arguments: dict, ctx: ToolContext) -> ToolResult:
    RUNS.append(ctx.idempotency_key)
    return ToolResult(success=True, output="x" * int(arguments["bytes"]))


async def events_of(client: AsyncClient, task_id: str, kind: str) -> list:
    return [e.payload for e in await client.events(task_id) if e.type == kind]


# -- a store that cannot take a finished tool's output ------------------------------------------------


async def test_a_full_store_never_runs_the_finished_tool_again_and_fails_naming_the_store_as_full(
    client: AsyncClient, task_queue: str, small_fs: Path
):
    RUNS.clear()
    store = LocalContentStore(small_fs)
    provider = FakeLLMProvider(responses=[call(("c1", "big_output", {"bytes": 30 * 2**20})), say("never")])
    registry = Registry.of(tools=[big_output], providers=[provider], content_store=store)
    async with build_worker(client.temporal, registry, task_queue):
        options = Options(provider=provider, allowed_tools=[big_output], max_retries=2)
        task_id = await client.start("store 30 MB", options, task_queue=task_queue)
        with pytest.raises(ContentStoreError) as info:
            await asyncio.wait_for(client.result(task_id), 60)
    assert len(RUNS) == 1  # the 30 MB tool ran exactly once
    assert (info.value.cause, info.value.store) == ("full", repr(store))
    assert f"content store {store!r} could not store a body of {30 * 2**20} bytes: it is full" in str(info.value)
    assert len(provider.received_requests) == 1  # the model was not asked again
    # Every failed write is on the record as the store's, none as a lost worker.
    retried = await events_of(client, task_id, "ToolCallRetried")
    assert [r.error_type for r in retried] == ["ContentStoreError"] * 2
    failed = await events_of(client, task_id, "TaskFailed")
    assert failed and failed[-1].error_type == "ContentStoreError"
    assert not [f for f in small_fs.rglob(".tmp-*")]  # no partial body left taking the space


async def test_a_store_that_fills_up_then_frees_space_stores_the_kept_output_and_the_task_completes(
    client: AsyncClient, task_queue: str, small_fs: Path
):
    RUNS.clear()
    filler = small_fs / "filler"
    filler.write_bytes(b"\0" * (7 * 2**20))  # 1 MiB left: not enough for a 3 MB output
    store = WatchedStore(small_fs / "content")
    provider = FakeLLMProvider(responses=[call(("c1", "big_output", {"bytes": 3 * 2**20})), say("stored")])
    registry = Registry.of(tools=[big_output], providers=[provider], content_store=store)
    async with build_worker(client.temporal, registry, task_queue):
        options = Options(provider=provider, allowed_tools=[big_output], max_retries=2)
        task_id = await client.start("store 3 MB", options, task_queue=task_queue)
        assert await asyncio.to_thread(store.failed.wait, 60)
        # While the write waits, the task's Current Details say why (the step told its task).
        shown: list[str] = []

        async def outage_shown() -> bool:
            shown[:] = [await client.current_details(task_id)]
            return "content store outage" in shown[0]

        await eventually(outage_shown, timeout=30)
        assert "(full)" in shown[0] and "is not run again" in shown[0] and "running tools" in shown[0]
        filler.unlink()  # the operator frees space
        result = await asyncio.wait_for(client.result(task_id), 60)
    assert (result.status, result.answer, len(RUNS)) == ("completed", "stored", 1)
    [retried] = await events_of(client, task_id, "ToolCallRetried")
    assert retried.error_type == "ContentStoreError" and "it is full" in retried.error
    [completed] = await events_of(client, task_id, "ToolCallCompleted")
    assert (completed.success, completed.attempt) == (True, 1)  # one attempt: only the write was retried
    digest = hashlib.sha256(b"x" * 3 * 2**20).hexdigest()
    assert store.get(digest) == b"x" * 3 * 2**20
    # The step's report is a signal in the task's history, and that history replays.
    history = await client.temporal.get_workflow_handle(task_id).fetch_history()
    signals = [e.workflow_execution_signaled_event_attributes.signal_name for e in history.events
               if e.HasField("workflow_execution_signaled_event_attributes")]
    assert signals == [SIGNAL_STORE_OUTAGE]
    assert await replay(history) is None


@tool(name="outage", version="1", input_schema={"type": "object"}, description="Cuts the database off as it ends.")
async def outage(arguments: dict, ctx: ToolContext) -> ToolResult:
    RUNS.append(ctx.idempotency_key)
    PROXIES[0].down()  # PostgreSQL goes away while the tool finishes
    DOWN_AT[:] = [time.monotonic()]
    return ToolResult(success=True, output=f"{ctx.idempotency_key} " + "y" * 20000)


PROXIES: list = []
DOWN_AT: list[float] = [0.0]


async def cut_off_mid_task(
    client: AsyncClient, task_queue: str, outage_seconds: float | None, **settings: object
) -> tuple[str, object, list[str]]:
    """Run a task whose tool cuts PostgreSQL (the content store, behind a proxy) off as it ends;
    the database comes back ``outage_seconds`` after that (None: never). The task's id, its
    result (or the error it failed with) and the Current Details seen during the outage."""
    require_postgres()
    import psycopg

    RUNS.clear()
    parts = urlsplit(DSN)
    table = f"noeta_outage_{uuid.uuid4().hex[:8]}"
    shown: list[str] = []
    with running_proxy((parts.hostname or "127.0.0.1", parts.port or 5432)) as proxy:
        PROXIES[:] = [proxy]
        netloc = f"{parts.username}@127.0.0.1:{proxy.port}" if parts.username else f"127.0.0.1:{proxy.port}"
        store = PostgresContentStore(urlunsplit(parts._replace(netloc=netloc)), table=table)
        failed = threading.Event()
        put = store.put

        def watched_put(data: bytes, media_type: str = "text/plain"):
            try:
                return put(data, media_type)
            except ContentStoreError:
                failed.set()
                raise

        store.put = watched_put  # type: ignore[method-assign]
        provider = FakeLLMProvider(responses=[call(("c1", "outage", {})), say("rode it out")])
        registry = Registry.of(tools=[outage], providers=[provider], content_store=store)
        options = Options(provider=provider, allowed_tools=[outage], **settings)  # type: ignore[arg-type]
        try:
            async with build_worker(client.temporal, registry, task_queue):
                task_id = await client.start("x", options, task_queue=task_queue)
                assert await asyncio.to_thread(failed.wait, 60)
                if outage_seconds is not None:

                    async def outage_shown() -> bool:
                        shown[:] = [await client.current_details(task_id)]
                        return "content store outage" in shown[0]

                    await eventually(outage_shown, timeout=30)
                    await asyncio.sleep(max(0.0, outage_seconds - (time.monotonic() - DOWN_AT[0])))
                    proxy.up()  # the database is back
                try:
                    result: object = await asyncio.wait_for(client.result(task_id), 120)
                except ContentStoreError as err:
                    result = err
        finally:
            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_owner, {table}_steps")
    return task_id, result, shown


async def assert_outage_on_record(client: AsyncClient, task_id: str) -> None:
    """Every retry of the tool is the store's outage, named as such: none is a lost worker."""
    retried = await events_of(client, task_id, "ToolCallRetried")
    assert retried and all(r.error_type == "ContentStoreError" and "it is unreachable" in r.error for r in retried)
    assert not [r for r in retried if "lost" in r.error or r.error_type == "Timeout"]


async def test_postgres_cut_off_mid_task_is_a_store_outage_the_task_rides_out(client: AsyncClient, task_queue: str):
    task_id, result, shown = await cut_off_mid_task(client, task_queue, 0.0)
    assert isinstance(result, TaskResult)
    assert (result.status, result.answer, len(RUNS)) == ("completed", "rode it out", 1)
    assert "(unreachable)" in shown[0] and "is not run again" in shown[0]
    await assert_outage_on_record(client, task_id)


@pytest.mark.slow
async def test_postgres_stopped_for_30_seconds_mid_task_the_task_completes_and_the_tool_ran_once(
    client: AsyncClient, task_queue: str
):
    # With max_retries=1 the step's retries alone (1 s) would not outlast the outage: the wait
    # for an unreachable store does not use them up.
    task_id, result, _ = await cut_off_mid_task(client, task_queue, 30.0, max_retries=1)
    assert isinstance(result, TaskResult)
    assert (result.status, result.answer, len(RUNS)) == ("completed", "rode it out", 1)
    await assert_outage_on_record(client, task_id)
    [completed] = await events_of(client, task_id, "ToolCallCompleted")
    assert (completed.success, completed.attempt) == (True, 1)  # only the write was tried again
    assert await events_of(client, task_id, "ToolCallFailed") == []


async def test_an_outage_longer_than_store_outage_wait_seconds_fails_the_task_naming_the_unreachable_store(
    client: AsyncClient, task_queue: str
):
    task_id, result, _ = await cut_off_mid_task(client, task_queue, None, store_outage_wait_seconds=2, max_retries=5)
    assert isinstance(result, ContentStoreError) and result.cause == "unreachable", result
    assert "it is unreachable" in str(result) and "password" not in str(result)
    assert len(RUNS) == 1  # the tool was not run again for the store
    await assert_outage_on_record(client, task_id)
    # Tried again after 1 s and after the 1 s left of the 2 s: the bound, not max_retries=5, ended it.
    assert len(await events_of(client, task_id, "ToolCallRetried")) == 2
    failed = await events_of(client, task_id, "TaskFailed")
    assert failed and failed[-1].error_type == "ContentStoreError"


# -- bodies that are altered or gone --------------------------------------------------------------


@tool(name="spoil", version="1", input_schema={"type": "object"}, description="Alters or deletes a stored body.")
async def spoil(arguments: dict, ctx: ToolContext) -> ToolResult:
    path = Path(arguments["path"])
    if arguments["how"] == "alter":
        data = bytearray(path.read_bytes())
        data[100] ^= 1
        path.write_bytes(bytes(data))
    else:
        path.unlink()
    return ToolResult(success=True, output="done")


@tool(name="document", version="1", input_schema={"type": "object"}, description="Returns a large document.")
async def document(arguments: dict, ctx: ToolContext) -> ToolResult:
    return ToolResult(success=True, output=arguments["text"])


@pytest.mark.parametrize(("how", "error"), [("alter", ContentIntegrityError), ("delete", ContentMissingError)])
async def test_a_stored_body_altered_or_deleted_fails_the_next_read_at_once_naming_hash_and_task(
    client: AsyncClient, task_queue: str, content_store: LocalContentStore, how: str, error: type
):
    text = f"{uuid.uuid4()} " * 1000  # a body of this test's own: others never share it
    digest = hashlib.sha256(text.encode()).hexdigest()
    path = content_store.root / digest[:2] / digest[2:]
    provider = FakeLLMProvider(
        responses=[
            call(("c1", "document", {"text": text})),
            call(("c2", "spoil", {"path": str(path), "how": how})),
            say("never"),
        ]
    )
    registry = Registry.of(tools=[document, spoil], providers=[provider], content_store=content_store)
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start("read it", Options(provider=provider, allowed_tools=[document, spoil]), task_queue=task_queue)
        with pytest.raises(error) as info:
            await asyncio.wait_for(client.result(task_id), 60)
    assert (info.value.digest, info.value.task_id) == (digest, task_id)
    assert digest in str(info.value)
    assert len(provider.received_requests) == 2  # the third request was never built, let alone sent
    assert await events_of(client, task_id, "ProviderCallRetried") == []  # failed within one attempt
    with pytest.raises(error) as read:
        await client.messages(task_id)
    assert (read.value.digest, read.value.task_id) == (digest, task_id)
    assert digest in str(read.value) and task_id in str(read.value)


def test_every_local_read_is_checked_against_its_hash_encrypted_or_not(tmp_path: Path):
    keys = parse_keys([f"k1:{'A' * 43}="])
    assert keys is not None
    for store in (LocalContentStore(tmp_path / "plain"), LocalContentStore(tmp_path / "sealed", cipher=BodyCipher(keys))):
        ref = store.put(b"the stored body " * 100)
        path = store.root / ref.hash[:2] / ref.hash[2:]
        good = path.read_bytes()
        path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
        with owned_by("task-7"), pytest.raises(ContentIntegrityError) as info:
            store.get(ref)
        assert (info.value.digest, info.value.task_id) == (ref.hash, "task-7")
        assert ref.hash in str(info.value) and "'task-7'" in str(info.value)
        path.unlink()
        with pytest.raises(ContentMissingError) as missing:
            store.get(ref)
        assert isinstance(missing.value, ContentNotFoundError) and isinstance(missing.value, KeyError)
        assert missing.value.digest == ref.hash and ref.hash in str(missing.value)
    # A body sealed under a key this process lacks names the key.
    other = LocalContentStore(tmp_path / "other", cipher=BodyCipher(keys))
    ref = other.put(b"sealed")
    with pytest.raises(EncryptionKeyError) as keyless:
        LocalContentStore(other.root).get(ref)
    assert keyless.value.key_id == "k1"


def test_every_postgres_read_is_checked_against_its_hash():
    require_postgres()
    import psycopg

    table = f"noeta_integrity_{uuid.uuid4().hex[:8]}"
    store = PostgresContentStore(DSN, table=table)
    try:
        ref = store.put(b"a body in the database")
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"UPDATE {table} SET data = %s WHERE hash = %s", (b"another body", ref.hash))
        with pytest.raises(ContentIntegrityError) as info:
            store.get(ref)
        assert info.value.digest == ref.hash
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DELETE FROM {table} WHERE hash = %s", (ref.hash,))
        with pytest.raises(ContentMissingError):
            store.get(ref)
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_owner")


def test_an_unreachable_database_is_a_content_store_error_naming_the_cause():
    require_postgres()
    parts = urlsplit(DSN)
    table = f"noeta_unreachable_{uuid.uuid4().hex[:8]}"
    with running_proxy((parts.hostname or "127.0.0.1", parts.port or 5432)) as proxy:
        netloc = f"{parts.username}@127.0.0.1:{proxy.port}" if parts.username else f"127.0.0.1:{proxy.port}"
        store = PostgresContentStore(urlunsplit(parts._replace(netloc=netloc)), table=table)
        try:
            ref = store.put(b"before")
            proxy.down()
            for attempt in (lambda: store.put(b"during"), lambda: store.get(ref)):
                with pytest.raises(ContentStoreError) as info:
                    attempt()
                assert (info.value.cause, info.value.store) == ("unreachable", repr(store))
                assert "password" not in str(info.value) and str(proxy.port) not in info.value.store
            proxy.up()
            assert store.get(ref) == b"before"  # a fresh connection once it is back
        finally:
            import psycopg

            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_owner")


def test_store_errors_cross_the_workflow_boundary_with_their_fields():
    err = ContentStoreError("full", store="LocalContentStore('/x')", cause="full")
    back = rebuild_error("ContentStoreError", "full", err.to_details())
    assert isinstance(back, ContentStoreError) and (back.store, back.cause) == (err.store, "full")
    missing = ContentMissingError("gone", digest="ab" * 32, task_id="t", store="s")
    back = rebuild_error("ContentMissingError", "gone", missing.to_details())
    assert isinstance(back, ContentMissingError) and (back.digest, back.task_id, str(back)) == ("ab" * 32, "t", "gone")
    keyless = rebuild_error("EncryptionKeyError", "m", EncryptionKeyError("m", key_id="k2").to_details())
    assert isinstance(keyless, EncryptionKeyError) and keyless.key_id == "k2"


def test_the_cause_of_a_store_failure_is_read_from_the_error():
    assert failure_cause(OSError(errno.ENOSPC, "No space left on device")) == "full"
    assert failure_cause(OSError(errno.EDQUOT, "Disk quota exceeded")) == "full"
    assert failure_cause(OSError(errno.EACCES, "Permission denied")) == "permission"
    assert failure_cause(OSError(errno.EROFS, "Read-only file system")) == "permission"
    assert failure_cause(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) == "unreachable"
    assert failure_cause(OSError(errno.ENAMETOOLONG, "name too long")) == "other"
