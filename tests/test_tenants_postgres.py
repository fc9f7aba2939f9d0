"""API keys in a PostgreSQL table (a fleet of ``noeta serve`` processes sharing them), over real
HTTP against the test PostgreSQL: a row's tenant and roles apply, only the secret's SHA-256 is
stored, a revoked key is refused once the table is read again, a row that does not parse is left
out while the others stay."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import uuid

import httpx
import pytest

from noeta.client.client import AsyncClient
from noeta.http import create_app
from noeta.security import key_table
from noeta.security.http_guard import GuardConfig, ServerSettings
from noeta.security.key_table import KeyTable
from tests.support.asgi import serving
from tests.support.postgres import DSN, require_postgres

SECRET = "table-key-" + "9c" * 16
OTHER = "table-key-" + "8d" * 16


def sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@pytest.fixture
def table():
    require_postgres()
    import psycopg

    name = f"keys_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")


async def test_keys_from_a_postgres_table(client: AsyncClient, table: str):
    import psycopg

    guard = GuardConfig(keys_dsn=DSN, keys_table=table, keys_refresh_seconds=0)
    assert DSN not in repr(guard)
    async with serving(create_app(client, guard=guard)) as base_url, httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        bearer = {"authorization": f"Bearer {SECRET}"}
        assert (await http.get("/tasks", headers=bearer)).status_code == 401  # the table is created, empty
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"INSERT INTO {table} (sha256, name, tenant, roles) VALUES (%s, 'ana', 'acme', 'read')", (sha(SECRET),))
            conn.execute(f"INSERT INTO {table} (sha256, name, tenant, roles) VALUES (%s, 'odd', 'acme', 'read,fly')", (sha(OTHER),))
            stored = conn.execute(f"SELECT count(*) FROM {table} WHERE sha256 = %s OR name = %s", (SECRET, SECRET)).fetchone()
        assert stored == (0,)  # the secret itself is nowhere in the table
        assert (await http.get("/tasks", headers=bearer)).status_code == 200
        refused = await http.post("/tasks", json={"goal": "x"}, headers=bearer)
        assert (refused.status_code, refused.json()["error"]) == (403, "Forbidden")  # read only
        assert (await http.get("/tasks", headers={"authorization": f"Bearer {OTHER}"})).status_code == 401  # bad row
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"UPDATE {table} SET revoked_at = now() WHERE name = 'ana'")
        assert (await http.get("/tasks", headers=bearer)).status_code == 401


def test_the_table_from_the_environment():
    guard = ServerSettings.from_env({"NOETA_API_KEYS_DSN": DSN, "NOETA_API_KEYS_TABLE": "fleet_keys"}).guard()
    assert (guard.keys_dsn, guard.keys_table, guard.authenticating) == (DSN, "fleet_keys", True)
    guard.check_bind("0.0.0.0")  # keys configured: any bind



async def test_a_database_that_never_answers_holds_requests_up_only_until_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    """Requests wait for the table's read: a database host that takes the connection and never
    answers (a silent socket here) must end that read at the connect timeout, not hold every
    request for good; the keys read before stay (none here)."""
    pytest.importorskip("psycopg")
    monkeypatch.setattr(key_table, "CONNECT_TIMEOUT_SECONDS", 2)  # libpq's least
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nobody answers
        keys = KeyTable(f"postgresql://noeta@127.0.0.1:{silent.getsockname()[1]}/test", "silent_keys", refresh_seconds=0)
        found = await asyncio.wait_for(keys.current(), 120)  # before: waited for an answer forever
    assert found == ()
    assert "API keys table silent_keys could not be read" in caplog.text
