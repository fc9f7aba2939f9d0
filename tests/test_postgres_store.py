"""The PostgreSQL content store against the real server (127.0.0.1:5432, database ``test``).

Skipped when no server answers, unless NOETA_REQUIRE_POSTGRES=1 (CI sets it) makes that a failure.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from noeta.client.client import AsyncClient
from noeta.client.messages import ToolResultView
from noeta.client.options import Options
from noeta.context.content_store import ContentNotFoundError
from noeta.errors import ConfigurationError
from noeta.sdk.testing import FakeLLMProvider
from noeta.worker import Registry, build_worker
from tests.support.postgres import DSN, require_postgres
from tests.support.scripts import call, say
from tests.support.tools import big_output

psycopg = pytest.importorskip("psycopg")
from noeta.context.postgres_step_records import PostgresStepRecords  # noqa: E402
from noeta.context.postgres_store import PostgresContentStore  # noqa: E402
from noeta.security.key_table import KeyTable  # noqa: E402


@pytest.fixture
def store() -> Iterator[PostgresContentStore]:
    require_postgres()
    table = f"noeta_content_{uuid.uuid4().hex[:8]}"
    yield PostgresContentStore(DSN, table=table)
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def test_put_get_is_content_addressed_and_idempotent(store: PostgresContentStore):
    ref = store.put(b"hello world", "text/plain")
    assert store.put(b"hello world", "text/plain") == ref
    assert (ref.size, ref.media_type, len(ref.hash)) == (11, "text/plain", 64)
    other_host = PostgresContentStore(DSN, table=store.table)  # a second process or host
    assert other_host.get(ref) == other_host.get(ref.hash) == b"hello world"
    with pytest.raises(ContentNotFoundError, match="must use the same content store"):
        store.get("0" * 64)
    with psycopg.connect(DSN) as conn:
        assert conn.execute(f"SELECT count(*) FROM {store.table}").fetchone() == (1,)


async def test_a_task_with_large_outputs_runs_on_the_postgres_store(store, client: AsyncClient, task_queue):
    provider = FakeLLMProvider(responses=[call(("c1", "big_output", {"kb": 6})), say("done")])
    registry = Registry.of(tools=[big_output], providers=[provider], content_store=store)
    async with build_worker(client.temporal, registry, task_queue):
        task_id = await client.start("big", Options(provider=provider, allowed_tools=[big_output]), task_queue=task_queue)
        assert (await client.result(task_id)).answer == "done"
    reader = AsyncClient(client.temporal, content_store=PostgresContentStore(DSN, table=store.table), task_queue=task_queue)
    [result] = [i for i in await reader.messages(task_id) if isinstance(i, ToolResultView)]
    assert len(result.output) == 6 * 1024 and result.output.startswith("c1: xxx")


def test_settings_choose_the_store_from_the_environment(store: PostgresContentStore, tmp_path):
    from noeta.client.config import Settings
    from noeta.errors import ConfigurationError

    chosen = Settings(home=tmp_path, content_store_url=DSN).content_store()
    assert isinstance(chosen, PostgresContentStore) and DSN not in repr(chosen)
    with pytest.raises(ConfigurationError, match="postgresql:// URL"):
        Settings(home=tmp_path, content_store_url="redis://127.0.0.1:6379").content_store()


def test_bodies_at_rest_are_ciphertext(store: PostgresContentStore):
    from noeta.errors import EncryptionKeyError
    from noeta.security.keys import new_key_entry, parse_keys
    from noeta.security.sealed_bodies import BodyCipher

    keys = parse_keys([new_key_entry("pg1")])
    assert keys is not None
    sealed = PostgresContentStore(DSN, table=store.table, cipher=BodyCipher(keys))
    body = b"customer record 5521: balance 1234.56"
    ref = sealed.put(body)
    assert sealed.get(ref) == body
    import hashlib

    assert ref.hash == hashlib.sha256(body).hexdigest()  # addressed by the plaintext's hash
    [row] = sealed._conn().execute(f"SELECT data FROM {store.table} WHERE hash = %s", (ref.hash,)).fetchall()
    assert b"customer record" not in bytes(row[0])
    with pytest.raises(EncryptionKeyError):
        store.get(ref)  # a store without the keys cannot read it, and says why


def test_retention_calls_name_an_unreachable_database_and_lose_nothing(store: PostgresContentStore):
    """claim, tasks and release fail as a ContentStoreError that names the cause, as put and get do,
    not as a raw driver error; what was stored is still there when the database is back."""
    from datetime import datetime, timezone

    from noeta.context.ownership import owned_by
    from noeta.errors import ContentStoreError

    with owned_by("task-a"):
        ref = store.put(b"kept body", "text/plain")
    reachable = store.dsn
    store.dsn = "postgresql://127.0.0.1:9/test?connect_timeout=2"  # nothing listens on port 9
    store._drop_connection()
    calls = {
        "claim": lambda: store.claim([ref.hash]),
        "tasks": store.tasks,
        "release": lambda: store.release(["task-a"], datetime.now(timezone.utc)),
    }
    for name, attempt in calls.items():
        with owned_by("task-b"), pytest.raises(ContentStoreError) as failed:
            attempt()
        assert type(failed.value) is ContentStoreError, name
        assert failed.value.cause == "unreachable", (name, str(failed.value))
    store.dsn = reachable
    assert store.get(ref) == b"kept body"
    assert set(store.tasks()) == {"task-a"}


@pytest.mark.parametrize("name", ["1st_table", "tablé", "keys;drop", "a b", "x" * 64, ""])
def test_every_postgres_table_name_is_a_plain_identifier_before_any_sql(name: str):
    """A table name goes into SQL text (identifiers cannot be bound parameters): one that is not a
    plain ASCII identifier is a ConfigurationError at construction, for every PostgreSQL-backed
    store alike; a name such as ``1st_table`` passed the former check and failed later as a
    database syntax error."""
    require_postgres()
    with pytest.raises(ConfigurationError, match="invalid table name"):
        PostgresContentStore(DSN, table=name)
    with pytest.raises(ConfigurationError, match="invalid table name"):
        PostgresStepRecords(DSN, name)
    with pytest.raises(ConfigurationError, match="invalid table name"):
        KeyTable(DSN, name)
