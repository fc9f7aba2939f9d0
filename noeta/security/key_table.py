"""API keys in a PostgreSQL table, shared by a fleet of ``noeta serve`` processes (docs/security.md).

``NOETA_API_KEYS_DSN`` names the database, ``NOETA_API_KEYS_TABLE`` the table (default
``noeta_api_keys``, created when missing). A row is a key of the keys file's kind, with only the
secret's SHA-256 stored (the secret itself never is)::

    INSERT INTO noeta_api_keys (sha256, name, tenant, roles)
    VALUES (encode(sha256('<secret>'::bytea), 'hex'), 'alice', 'acme', 'read,approve');
    UPDATE noeta_api_keys SET revoked_at = now() WHERE name = 'alice';   -- revoke

Each server reads the table again at most every ``refresh_seconds`` (a request that finds it
older waits for the read); a read that fails keeps the keys read before (and logs why), a
database that does not answer a connection within CONNECT_TIMEOUT_SECONDS counts as failing, a
row that does not parse is left out (and logged).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from noeta.config.postgres import psycopg_driver, table_name
from noeta.errors import ConfigurationError
from noeta.security.api_keys import ROLES, ApiKey

logger = logging.getLogger(__name__)

DEFAULT_TABLE = "noeta_api_keys"
#: How old the keys read from the table may be before a request reads them again.
DEFAULT_REFRESH_SECONDS = 5.0
#: How long a read waits for the database to answer a connection: requests wait for the read, so an
#: unreachable database must cost them this long at most (then the keys read before stay).
CONNECT_TIMEOUT_SECONDS = 5

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    sha256 text PRIMARY KEY,
    name text NOT NULL UNIQUE,
    tenant text NOT NULL DEFAULT 'default',
    roles text NOT NULL DEFAULT 'read',
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
)
"""


class KeyTable:
    """The keys of a PostgreSQL table, read again when older than ``refresh_seconds``."""

    def __init__(self, dsn: str, table: str = DEFAULT_TABLE, refresh_seconds: float = DEFAULT_REFRESH_SECONDS) -> None:
        """ConfigurationError without psycopg or for a table name that is not an identifier."""
        self._psycopg = psycopg_driver("a table of API keys")
        self._dsn, self.table, self.refresh_seconds = dsn, table_name(table), refresh_seconds
        self._keys: tuple[ApiKey, ...] = ()
        self._read_at: float | None = None
        self._conn: Any = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        """The table, never the DSN (it may hold a password)."""
        return f"KeyTable(table={self.table!r})"

    async def current(self) -> tuple[ApiKey, ...]:
        """The table's keys that are not revoked, read again when older than ``refresh_seconds``."""
        if self._fresh():
            return self._keys
        async with self._lock:
            if not self._fresh():
                try:
                    self._keys = await self._read()
                except self._psycopg.Error as err:
                    logger.error("API keys table %s could not be read; the keys read before stay: %s", self.table, err)
                    await self._close()
                self._read_at = time.monotonic()
        return self._keys

    def _fresh(self) -> bool:
        return self._read_at is not None and time.monotonic() - self._read_at < self.refresh_seconds

    async def _read(self) -> tuple[ApiKey, ...]:
        if self._conn is None or self._conn.closed:
            self._conn = await self._psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
            )
            async with self._conn.transaction():
                # Servers starting together would otherwise race on CREATE TABLE IF NOT EXISTS.
                await self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table,))
                await self._conn.execute(_SCHEMA.format(table=self.table))
        cursor = await self._conn.execute(
            f"SELECT sha256, name, tenant, roles FROM {self.table} WHERE revoked_at IS NULL ORDER BY name"
        )
        keys = []
        for sha256, name, tenant, roles in await cursor.fetchall():
            key = _row_key(sha256, name, tenant, roles, self.table)
            if key is not None:
                keys.append(key)
        return tuple(keys)

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except self._psycopg.Error:
                pass


def _row_key(sha256: str, name: str, tenant: str, roles: str, table: str) -> ApiKey | None:
    wanted = {r.strip() for r in roles.split(",") if r.strip()}
    try:
        unknown = wanted - set(ROLES)
        if unknown:
            raise ConfigurationError(f"unknown role(s) {', '.join(sorted(unknown))}")
        return ApiKey(sha256=sha256.strip().lower(), name=name, tenant=tenant, roles=frozenset(r for r in ROLES if r in wanted))
    except ConfigurationError as err:
        logger.error("API keys table %s: the key %r is left out: %s", table, name, err)
        return None
